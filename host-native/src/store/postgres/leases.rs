//! Leases of the queue's partitions (docs/decisions/postgres.md, postgres-leases):
//! rows of `queue_parts` naming their holder until a time, and `queue_appliers`,
//! the servers applying now. Each server holds its share (the partitions over the
//! live appliers, rounded up), renewing its leases at each call; one holding more
//! gives the extra back, one holding fewer takes free or expired ones. A lease only
//! spreads the work: what keeps a job applied once is the acknowledgement's check
//! in the commit, whoever holds the lease.

use deadpool_postgres::GenericClient;

/// Renews `holder`'s place among the appliers and its leases, and moves it toward
/// its share of `parts` partitions.
pub async fn renew<C: GenericClient>(
    c: &C,
    holder: &str,
    parts: i64,
    lease_secs: f64,
) -> Result<(), tokio_postgres::Error> {
    c.execute(
        "INSERT INTO queue_appliers (holder, seen) VALUES ($1, now()) ON CONFLICT (holder) DO UPDATE SET seen = now()",
        &[&holder],
    )
    .await?;
    c.execute("DELETE FROM queue_appliers WHERE seen < now() - make_interval(secs => $1)", &[&lease_secs]).await?;
    let live: i64 = c.query_one("SELECT count(*) FROM queue_appliers", &[]).await?.get(0);
    let share = (parts + live.max(1) - 1) / live.max(1);
    let mine: Vec<i32> = c
        .query(
            "UPDATE queue_parts SET lease_until = now() + make_interval(secs => $2) WHERE holder = $1 RETURNING part",
            &[&holder, &lease_secs],
        )
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    let held = mine.len() as i64;
    if held > share {
        let mut extra = mine;
        extra.sort_unstable();
        let extra: Vec<i32> = extra.split_off(share as usize);
        c.execute(
            "UPDATE queue_parts SET holder = NULL, lease_until = NULL WHERE holder = $1 AND part = ANY($2)",
            &[&holder, &extra],
        )
        .await?;
    } else if held < share {
        c.execute(
            "UPDATE queue_parts SET holder = $1, lease_until = now() + make_interval(secs => $3)
             WHERE part IN (SELECT part FROM queue_parts WHERE holder IS NULL OR lease_until < now()
                            ORDER BY part LIMIT $2 FOR UPDATE SKIP LOCKED)",
            &[&holder, &(share - held), &lease_secs],
        )
        .await?;
    }
    Ok(())
}

/// The partitions `holder` holds a live lease of, in order.
pub async fn held<C: GenericClient>(c: &C, holder: &str) -> Result<Vec<u16>, tokio_postgres::Error> {
    let rows = c
        .query("SELECT part FROM queue_parts WHERE holder = $1 AND lease_until > now() ORDER BY part", &[&holder])
        .await?;
    Ok(rows.iter().map(|r| r.get::<_, i32>(0) as u16).collect())
}

/// Gives up `holder`'s leases and its place among the appliers.
pub async fn release<C: GenericClient>(c: &C, holder: &str) -> Result<(), tokio_postgres::Error> {
    c.execute("UPDATE queue_parts SET holder = NULL, lease_until = NULL WHERE holder = $1", &[&holder]).await?;
    c.execute("DELETE FROM queue_appliers WHERE holder = $1", &[&holder]).await?;
    Ok(())
}
