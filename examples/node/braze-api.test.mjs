// An application's calls through npm braze-api, checked against Engage.
//
// Copy this folder, `npm install /path/to/engage-server-VERSION.tgz` (braze-api
// comes with it, from package.json), then `npm test` (node:test): one throwaway
// server for the file, a fresh workspace for each test.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Braze } from 'braze-api';
import { startEngage } from 'engage-server';

let server;
before(async () => {
  server = await startEngage();
});
after(async () => {
  await server?.stop();
});

/** A test with a workspace of its own and a braze-api client on it; the workspace is removed after. */
function engageTest(name, fn) {
  test(name, async () => {
    const engage = await server.newWorkspace();
    try {
      await fn(engage, new Braze(engage.url, engage.apiKey));
    } finally {
      await engage.remove();
    }
  });
}

const NEWSLETTER = { id: 'newsletter', name: 'Newsletter', channel: 'email' };

engageTest('a tracked user is exported', async (engage, braze) => {
  await braze.users.track({
    attributes: [{ external_id: 'ada', first_name: 'Ada', visits: { inc: 1 } }],
    events: [{ external_id: 'ada', name: 'signed_up', time: '2026-01-02T10:00:00Z' }],
  });

  const [user] = (await braze.users.export.ids({ external_ids: ['ada'] })).users;
  assert.equal(user.first_name, 'Ada');
  assert.deepEqual(user.custom_attributes, { visits: 1 });
  assert.deepEqual(user.custom_events.map((e) => e.name), ['signed_up']);
  const [track] = await engage.requests({ method: 'POST', path: '/users/track' });
  assert.equal(track.status, 201);
});

engageTest('a subscription group state set through v2 is what the user status reads', async (engage, braze) => {
  await engage.seed({
    groups: [NEWSLETTER],
    users: [{ attributes: [{ external_id: 'ada', email: 'ada@example.com' }] }],
  });

  await braze.v2.subscription.status.set({
    subscription_groups: [{ subscription_group_id: 'newsletter', subscription_state: 'subscribed', external_ids: ['ada'] }],
  });
  let [user] = (await braze.subscription.user.status({ external_id: 'ada' })).users;
  assert.deepEqual(user.subscription_groups.map((g) => [g.id, g.status]), [['newsletter', 'Subscribed']]);

  await braze.v2.subscription.status.set({
    subscription_groups: [{ subscription_group_id: 'newsletter', subscription_state: 'unsubscribed', external_ids: ['ada'] }],
  });
  [user] = (await braze.subscription.user.status({ external_id: 'ada' })).users;
  assert.deepEqual(user.subscription_groups.map((g) => [g.id, g.status]), [['newsletter', 'Unsubscribed']]);
});

engageTest('a rate-limited track rejects with 429, and the application retries it', async (engage, braze) => {
  const fault = await engage.fault({ method: 'POST', path: '/users/track', status: 429, times: 1, retry_after_secs: 1 });
  const body = { attributes: [{ external_id: 'ada', first_name: 'Ada' }] };

  // braze-api does not retry: the 429 reaches the caller as a ResponseError.
  await assert.rejects(braze.users.track(body), (error) => error.status === 429);
  const answer = await braze.users.track(body);

  assert.equal(answer.message, 'success');
  assert.equal(await engage.count({ path: '/users/track', status: 429 }), 1);
  assert.equal(await engage.count({ path: '/users/track', status: 201 }), 1);
  const [newest, first] = await engage.requests({ path: '/users/track' });
  assert.deepEqual([first.status, first.fault, newest.status], [429, fault, 201]);
});

engageTest('a snapshot brings back a deleted user', async (engage, braze) => {
  await braze.users.track({ attributes: [{ external_id: 'ada', first_name: 'Ada' }] });
  await engage.snapshot('with-ada');

  await braze.users.delete({ external_ids: ['ada'] });
  assert.deepEqual((await braze.users.export.ids({ external_ids: ['ada'] })).users, []);

  await engage.restore('with-ada');
  assert.equal((await braze.users.export.ids({ external_ids: ['ada'] })).users[0].first_name, 'Ada');
});

engageTest('profiles are stamped with the workspace clock', async (engage, braze) => {
  await braze.users.track({ attributes: [{ external_id: 'ada' }] });
  await engage.advanceClock(3 * 24 * 3600);
  await braze.users.track({ attributes: [{ external_id: 'grace' }] });

  const { users } = await braze.users.export.ids({ external_ids: ['ada', 'grace'] });
  const created = Object.fromEntries(users.map((u) => [u.external_id, Date.parse(u.created_at)]));
  assert.ok(created.grace - created.ada >= 3 * 24 * 3600 * 1000, JSON.stringify(created));
});
