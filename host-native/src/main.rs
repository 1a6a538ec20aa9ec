//! `engage`: the native host. A command line over the core: `serve` runs the HTTP
//! server on SQLite; `keys` and `groups` provision a workspace; `scim-tokens` the
//! deployment's SCIM access; `cdi` its warehouse syncs.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use engage::serve::serve;
use engage::server::{self, ServeArgs};
use engage::{ctx, store};
use engage_core::provision::{self, parse_permission_list, Channel, WorkspaceName};
use engage_core::testing;

#[derive(Parser)]
#[command(name = "engage", version = engage::VERSION, about = "Engage: a self-hostable customer-engagement user-data API")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the HTTP server.
    Serve(ServeArgs),
    /// Manage API keys.
    Keys {
        #[command(subcommand)]
        command: KeysCommand,
    },
    /// List workspaces.
    Workspaces {
        #[command(subcommand)]
        command: WorkspacesCommand,
    },
    /// Manage subscription groups.
    Groups {
        #[command(subcommand)]
        command: GroupsCommand,
    },
    /// Manage SCIM tokens (the deployment's, for provisioning dashboard users).
    ScimTokens {
        #[command(subcommand)]
        command: ScimTokensCommand,
    },
    /// Manage warehouse syncs (CDI): integrations and their jobs.
    Cdi {
        #[command(subcommand)]
        command: engage::cdi::cli::CdiCommand,
    },
    /// Copy the database (and its queued writes) while the server runs.
    Backup(engage::backup::BackupArgs),
    /// Ask a running server whether it is ready (its `/readyz`): exit 0 if so, 1 if
    /// not, saying why. A container's health check.
    Health(engage::health::HealthArgs),
    /// Load a fixtures file (workspaces, keys, groups, users, subscription states,
    /// preference centers, SCIM users) into a database no server runs on; with a
    /// server, use `engage serve --seed` or `POST /_engage/seed`. The same file
    /// again changes nothing.
    Seed {
        #[command(flatten)]
        db: DbArg,
        /// The fixtures file (JSON).
        file: PathBuf,
    },
    /// Remove the data of a database no server runs on (with a server, use
    /// `POST /_engage/reset`): profiles, events, subscription states, preference
    /// centers, sync jobs and, without --workspace, SCIM users. Keys, groups, SCIM
    /// tokens and integrations stay unless --keep none.
    Reset {
        #[command(flatten)]
        db: DbArg,
        /// Only this workspace.
        #[arg(long)]
        workspace: Option<String>,
        /// `keys` (keep the set-up) or `none`.
        #[arg(long, default_value = "keys")]
        keep: String,
    },
}

#[derive(Subcommand)]
enum ScimTokensCommand {
    /// Create a SCIM token and print it (only the token, on stdout). Requests must
    /// carry `X-Request-Origin: ORIGIN` with it.
    Create {
        #[command(flatten)]
        db: DbArg,
        /// The identity provider's request origin, e.g. `https://okta.example.com`.
        #[arg(long)]
        origin: String,
        /// The department of a user created without one (Okta's default profile
        /// sends none): agency, bi, c_suite, engineering, finance, marketing or pm.
        #[arg(long)]
        default_department: Option<String>,
    },
}

#[derive(Args)]
pub struct DbArg {
    /// SQLite database file (created on first use), or a PostgreSQL database
    /// (`postgres://user:password@host:port/db`).
    #[arg(long, env = "ENGAGE_DB", default_value = "engage.db")]
    pub db: PathBuf,
}

#[derive(Args)]
struct WorkspaceArg {
    /// Workspace the key or group belongs to.
    #[arg(long, default_value = "default")]
    workspace: String,
}

#[derive(Subcommand)]
enum WorkspacesCommand {
    /// One `name<TAB>created<TAB>keys` line per workspace.
    List {
        #[command(flatten)]
        db: DbArg,
    },
}

#[derive(Subcommand)]
enum KeysCommand {
    /// List API keys, one `id<TAB>workspace<TAB>permissions<TAB>created<TAB>last used`
    /// line each (no secrets: the id is the start of the key's hash).
    List {
        #[command(flatten)]
        db: DbArg,
    },
    /// Revoke an API key by its id (from `keys list`): it stops working at once
    /// (at the edge within a minute, the lifetime of its key cache).
    Revoke {
        #[command(flatten)]
        db: DbArg,
        /// The key's id.
        id: String,
    },
    /// Create an API key and print it (only the key, on stdout).
    Create {
        #[command(flatten)]
        db: DbArg,
        #[command(flatten)]
        workspace: WorkspaceArg,
        /// `all`, or a comma-separated list such as `users.track,users.export.ids`.
        #[arg(long, default_value = "all")]
        permissions: String,
    },
}

#[derive(Subcommand)]
enum GroupsCommand {
    /// Create a subscription group and print its id.
    Create {
        #[command(flatten)]
        db: DbArg,
        #[command(flatten)]
        workspace: WorkspaceArg,
        /// Display name.
        #[arg(long)]
        name: String,
        /// email, sms, whatsapp, rcs or line.
        #[arg(long)]
        channel: String,
    },
    /// List subscription groups: one `id<TAB>channel<TAB>name` line each.
    List {
        #[command(flatten)]
        db: DbArg,
        #[command(flatten)]
        workspace: WorkspaceArg,
    },
}

fn workspace(name: &str) -> Result<WorkspaceName, String> {
    WorkspaceName::parse(name).ok_or_else(|| format!("invalid workspace name '{name}': {}", WorkspaceName::RULE))
}

/// An engine on a database for a command that changes it as a server would (a
/// fixtures file, a reset), when no server runs on it. `create`: make the database
/// if there is none.
fn offline_engine(db: &std::path::Path, create: bool) -> Result<engage_core::Engine<store::NativeStore>, String> {
    // Servers on PostgreSQL hold no lock this command could see: it would change
    // their data under them.
    if store::postgres::is_postgres_url(&db.to_string_lossy()) {
        return Err(
            "on PostgreSQL, use a server's POST /_engage/seed and POST /_engage/reset (or engage serve --seed)".into(),
        );
    }
    if server::server_runs_on(db) {
        return Err(format!(
            "a server runs on {}: use its routes (POST /_engage/seed, POST /_engage/reset) with its admin token",
            db.display()
        ));
    }
    let store = if create { store::NativeStore::open_or_create(db)? } else { store::NativeStore::open_existing(db)? };
    Ok(engage_core::Engine::new(store, engage_core::Config { rate_limits: false, ..engage_core::Config::default() }))
}

fn run(cli: Cli) -> Result<(), String> {
    match cli.command {
        Command::Serve(args) => serve(args),
        Command::Keys { command: KeysCommand::List { db } } => {
            let store = store::NativeStore::open_existing(&db.db)?;
            for k in pollster::block_on(provision::list_keys(&store)).map_err(|e| format!("{e:?}"))? {
                let used = k.last_used_at.as_deref().unwrap_or("never");
                engage::outln!("{}\t{}\t{}\t{}\t{used}", k.id, k.workspace, k.permissions.join(","), k.created_at);
            }
            Ok(())
        }
        Command::Keys { command: KeysCommand::Revoke { db, id } } => {
            let store = store::NativeStore::open_existing(&db.db)?;
            match pollster::block_on(provision::revoke_key(&store, &id)) {
                Ok(true) => Ok(()),
                Ok(false) => Err(format!("no API key with id '{id}'")),
                Err(engage_core::ApiError::BadRequest(m)) => Err(m),
                Err(e) => Err(format!("{e:?}")),
            }
        }
        Command::Workspaces { command: WorkspacesCommand::List { db } } => {
            let store = store::NativeStore::open_existing(&db.db)?;
            for w in pollster::block_on(provision::list_workspaces(&store)).map_err(|e| format!("{e:?}"))? {
                engage::outln!("{}\t{}\t{}", w.name, w.created_at, w.keys);
            }
            Ok(())
        }
        Command::Keys { command: KeysCommand::Create { db, workspace: ws, permissions } } => {
            let ws = workspace(&ws.workspace)?;
            let perms = parse_permission_list(&permissions)?;
            let store = store::NativeStore::open_or_create(&db.db)?;
            let key =
                pollster::block_on(provision::create_key(&store, &ws, perms, ctx())).map_err(|e| format!("{e:?}"))?;
            engage::outln!("{key}");
            Ok(())
        }
        Command::Groups { command: GroupsCommand::Create { db, workspace: ws, name, channel } } => {
            let ws = workspace(&ws.workspace)?;
            let channel = Channel::parse(&channel).ok_or("channel must be one of email, sms, whatsapp, rcs, line")?;
            let store = store::NativeStore::open_or_create(&db.db)?;
            let g = pollster::block_on(provision::create_group(&store, &ws, &name, channel, ctx()))
                .map_err(|e| format!("{e:?}"))?;
            engage::outln!("{}", g.id);
            Ok(())
        }
        Command::ScimTokens { command: ScimTokensCommand::Create { db, origin, default_department } } => {
            let store = store::NativeStore::open_or_create(&db.db)?;
            let wanted = provision::TokenFor { origin: &origin, default_department: default_department.as_deref() };
            let token =
                pollster::block_on(provision::create_scim_token(&store, wanted, ctx())).map_err(|e| match e {
                    engage_core::ApiError::BadRequest(m) => m,
                    e => format!("{e:?}"),
                })?;
            engage::outln!("{token}");
            Ok(())
        }
        Command::Seed { db, file } => {
            let bytes = std::fs::read(&file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
            let seed = testing::parse_seed(&bytes).map_err(|e| format!("{}: {e}", file.display()))?;
            // Checked whole before the database is opened (or made).
            pollster::block_on(testing::check_seed(&seed, "http://localhost", ctx()))
                .map_err(|e| format!("{}: {e}", file.display()))?;
            let engine = offline_engine(&db.db, true)?;
            match pollster::block_on(engine.load_seed(&seed, "http://localhost", ctx()))
                .map_err(|e| format!("{}: {e}", file.display()))?
            {
                testing::Loaded::Now(n) => engage::outln!("loaded {n} entries"),
                testing::Loaded::Before => engage::outln!("already loaded: nothing changed"),
            }
            Ok(())
        }
        Command::Reset { db, workspace: ws, keep } => {
            let keep = match keep.as_str() {
                "keys" => testing::Keep::Setup,
                "none" => testing::Keep::Nothing,
                other => return Err(format!("--keep is keys or none, not '{other}'")),
            };
            let scope = testing::ResetScope { workspace: ws.as_deref().map(workspace).transpose()?, keep };
            let engine = offline_engine(&db.db, false)?;
            let report = pollster::block_on(engine.reset(&scope, ctx())).map_err(|e| e.message())?;
            engage::outln!(
                "removed {} documents; {} integrations set back to never run",
                report.removed,
                report.integrations_reset
            );
            Ok(())
        }
        Command::Cdi { command } => engage::cdi::cli::run(command),
        Command::Backup(args) => engage::backup::run(args),
        Command::Health(args) => {
            engage::outln!("{}", engage::health::run(&args)?);
            Ok(())
        }
        Command::Groups { command: GroupsCommand::List { db, workspace: ws } } => {
            let ws = workspace(&ws.workspace)?;
            let store = store::NativeStore::open_existing(&db.db)?;
            for g in pollster::block_on(provision::list_groups(&store, &ws)).map_err(|e| e.to_string())? {
                engage::outln!("{}\t{}\t{}", g.id, g.channel.as_str(), g.name);
            }
            Ok(())
        }
    }
}

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's settings, read when it starts.
#[allow(non_upper_case_globals)]
#[export_name = "_rjem_malloc_conf"]
pub static malloc_conf: &[u8] = b"narenas:2,dirty_decay_ms:1000,muzzy_decay_ms:0\0";

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("engage: {e}");
            ExitCode::FAILURE
        }
    }
}
