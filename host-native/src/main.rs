//! `engage`: the native host. A command line over the core: `serve` runs the HTTP
//! server on SQLite; `keys` and `groups` provision a workspace.

mod server;
mod sqlite;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use engage_core::auth::{parse_permission_list, WorkspaceName};
use engage_core::groups::{self, Channel};
use engage_core::ids::IdGen;
use engage_core::{Ctx, Timestamp};

#[derive(Parser)]
#[command(name = "engage", version, about = "Engage: a self-hostable customer-engagement user-data API")]
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
    /// Manage subscription groups.
    Groups {
        #[command(subcommand)]
        command: GroupsCommand,
    },
}

#[derive(Args)]
struct DbArg {
    /// SQLite database file (created on first use).
    #[arg(long, default_value = "engage.db")]
    db: PathBuf,
}

#[derive(Args)]
struct WorkspaceArg {
    /// Workspace the key or group belongs to.
    #[arg(long, default_value = "default")]
    workspace: String,
}

/// Options of `engage serve`.
#[derive(Args)]
pub struct ServeArgs {
    #[command(flatten)]
    db: DbArg,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: String,
    /// Largest request body accepted, in bytes.
    #[arg(long, default_value_t = 4 * 1024 * 1024)]
    max_body_bytes: usize,
    /// Do not enforce the API's rate limits (for load tests).
    #[arg(long)]
    no_rate_limits: bool,
    /// Queued track requests applied per commit.
    #[arg(long, default_value_t = engage_core::queue::DEFAULT_BATCH)]
    apply_batch: usize,
    /// Enables the operator routes under /_engage/ (create keys and groups over HTTP).
    #[arg(long, env = "ENGAGE_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: Option<String>,
    /// Stop when standard input closes (lets a test harness own the server's lifetime).
    #[arg(long, hide = true)]
    exit_on_stdin_eof: bool,
}

#[derive(Subcommand)]
enum KeysCommand {
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

/// The host's context for one request: the wall clock and fresh OS randomness.
pub fn ctx() -> Ctx {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    let mut seed = [0u8; 16];
    // Without OS randomness we must not mint keys or ids.
    getrandom::fill(&mut seed).expect("the operating system's random source is unavailable");
    Ctx { now: Timestamp(now), seed }
}

fn workspace(name: &str) -> Result<WorkspaceName, String> {
    WorkspaceName::parse(name).ok_or_else(|| format!("invalid workspace name '{name}': use letters, digits, '-', '_', '.'"))
}

fn run(cli: Cli) -> Result<(), String> {
    match cli.command {
        Command::Serve(args) => server::serve(args),
        Command::Keys { command: KeysCommand::Create { db, workspace: ws, permissions } } => {
            let ws = workspace(&ws.workspace)?;
            let perms = parse_permission_list(&permissions)?;
            let store = sqlite::SqliteStore::open(&db.db).map_err(|e| e.to_string())?;
            let key = pollster::block_on(engage_core::workspace::create_key(&store, &ws, perms, ctx()))
                .map_err(|e| format!("{e:?}"))?;
            println!("{key}");
            Ok(())
        }
        Command::Groups { command: GroupsCommand::Create { db, workspace: ws, name, channel } } => {
            let ws = workspace(&ws.workspace)?;
            let channel = Channel::parse(&channel).ok_or("channel must be one of email, sms, whatsapp, rcs, line")?;
            let store = sqlite::SqliteStore::open(&db.db).map_err(|e| e.to_string())?;
            let c = ctx();
            let g = pollster::block_on(groups::create(&store, &ws, &name, channel, c.now, &mut IdGen::new(c.seed)))
                .map_err(|e| format!("{e:?}"))?;
            println!("{}", g.id);
            Ok(())
        }
        Command::Groups { command: GroupsCommand::List { db, workspace: ws } } => {
            let ws = workspace(&ws.workspace)?;
            let store = sqlite::SqliteStore::open(&db.db).map_err(|e| e.to_string())?;
            for g in pollster::block_on(groups::list(&store, &ws)).map_err(|e| e.to_string())? {
                println!("{}\t{}\t{}", g.id, g.channel.as_str(), g.name);
            }
            Ok(())
        }
    }
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("engage: {e}");
            ExitCode::FAILURE
        }
    }
}
