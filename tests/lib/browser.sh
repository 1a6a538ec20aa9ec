# Shared by the browser tests (www/test.sh, tests/newcomer/run.sh): Debian's
# Chromium, and playwright-core at the version www/package-lock.json pins.
# Source it with ROOT set to the repository root.

if [ ! -x /usr/bin/chromium ]; then
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y chromium
fi
(cd "$ROOT/www" && if ! node -e '
  const want = require("./package-lock.json").packages["node_modules/playwright-core"].version;
  process.exit(require("./node_modules/playwright-core/package.json").version === want ? 0 : 1)' 2>/dev/null; then
  npm ci --no-audit --no-fund
fi)
