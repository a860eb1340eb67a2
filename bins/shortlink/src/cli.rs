//! The command line (README.md and `shortlink --help`): `serve` (the default), `migrate`,
//! `workspace create|list|update`, `key create|list|revoke`. Every flag can also come from the
//! environment.

use anyhow::Context;
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use shortlink_analytics::TrustedProxies;
use shortlink_domain::{ApiKeyId, BaseUrl, DEFAULT_RATE_LIMIT};
use shortlink_http::routes::dashboard::RootRedirect;
use shortlink_server::{Application, Config, admin};
use shortlink_storage::{PoolOptions, Schema, Store};
use shortlink_webhooks::RetrySchedule;

use crate::logging::LogFormat;

#[derive(Debug, Parser)]
#[command(name = "shortlink", version, about = "A link-shortening service")]
pub struct Cli {
    /// `sqlite://PATH` (embedded, the default) or `postgres://USER@HOST/DB`.
    #[arg(
        long,
        env = "DATABASE_URL",
        default_value = "sqlite://shortlink.db",
        global = true
    )]
    database_url: String,

    /// How log lines are written.
    #[arg(long, env = "SHORTLINK_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text, global = true)]
    log_format: LogFormat,

    /// Flags of `serve`, for the bare `shortlink`, which serves. They are `serve`'s own flags as
    /// well, and not global: the other commands take none of them, and their help lists only
    /// what they take. Given before `serve` (`shortlink --listen … serve`), they count as given
    /// after it, unless given there too ([`ServeArgs::fill_in`]).
    #[command(flatten, next_help_heading = "Options of serve (the default command)")]
    serve: ServeArgs,

    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
#[expect(
    clippy::large_enum_variant,
    reason = "one value, parsed once at start; a box would buy nothing"
)]
enum Command {
    /// Run migrations, then serve the API and the redirects (the default).
    Serve(ServeArgs),
    /// Run pending migrations and exit.
    Migrate,
    /// Manage workspaces.
    #[command(subcommand)]
    Workspace(WorkspaceCommand),
    /// Manage API keys.
    #[command(subcommand)]
    Key(KeyCommand),
}

#[derive(Debug, Clone, Args)]
struct ServeArgs {
    /// Address to listen on.
    #[arg(
        long,
        env = "SHORTLINK_LISTEN",
        default_value = shortlink_server::DEFAULT_LISTEN
    )]
    listen: String,
    /// Public base of short URLs (default `http://<listen>`).
    #[arg(long, env = "SHORTLINK_BASE_URL", value_parser = parse_base_url)]
    base_url: Option<BaseUrl>,
    /// Allow webhook targets on loopback and private addresses.
    #[arg(long, env = "SHORTLINK_WEBHOOK_ALLOW_PRIVATE_TARGETS")]
    webhook_allow_private_targets: bool,
    /// Delays between webhook delivery attempts, after the first try.
    #[arg(long, env = "SHORTLINK_WEBHOOK_RETRY_SCHEDULE", default_value_t = RetrySchedule::default())]
    webhook_retry_schedule: RetrySchedule,
    /// Failed authentications allowed per client address per minute; past it, the address gets
    /// 429 for every request until its budget refills.
    #[arg(long, env = "SHORTLINK_AUTH_FAILURES_PER_MINUTE", default_value_t = shortlink_http::ratelimit::AUTH_FAILURES_PER_MINUTE,
          value_parser = clap::value_parser!(u32).range(1..))]
    auth_failures_per_minute: u32,
    /// SQLite: MiB of memory for every link's redirect target, so a redirect never reads the
    /// database (about 20 bytes a link plus its code and destination); 0 for none. Past it,
    /// redirects read the database behind a bounded cache.
    #[arg(long, env = "SHORTLINK_REDIRECT_INDEX_MIB", default_value_t = shortlink_server::DEFAULT_REDIRECT_INDEX_MIB)]
    redirect_index_mib: usize,
    /// SQLite: seconds between folds of the click journal into the file's counters. Longer costs
    /// less per click; it is how old the counts another process reads from the file may be.
    #[arg(long, env = "SHORTLINK_CLICK_FOLD_SECONDS", default_value_t = shortlink_storage::CLICK_FOLD_INTERVAL.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    click_fold_seconds: u64,
    /// Send visitors of `/` to this URL instead of serving the dashboard there.
    #[arg(long, env = "SHORTLINK_ROOT_REDIRECT", value_parser = parse_root_redirect)]
    root_redirect: Option<RootRedirect>,
    /// Log every redirect (and every other request outside the API) at `info`; otherwise at
    /// `debug`, shown only with `RUST_LOG=debug`.
    #[arg(long, env = "SHORTLINK_LOG_REDIRECTS")]
    log_redirects: bool,
    /// Serve Prometheus metrics at `/metrics` on this address, a listener of its own (default:
    /// no metrics).
    #[arg(long, env = "SHORTLINK_METRICS_LISTEN")]
    metrics_listen: Option<String>,
    /// Proxies (CIDR blocks or addresses, comma-separated) whose `X-Forwarded-For` names the
    /// client; the right-most entry not itself trusted is the client address.
    #[arg(long, env = "SHORTLINK_TRUSTED_PROXIES", default_value = "", value_parser = parse_trusted_proxies)]
    trusted_proxies: TrustedProxies,
    /// A GeoIP database in the MaxMind DB format (GeoLite2-City, DB-IP lite, …) for clicks'
    /// countries and cities; reloaded on SIGHUP.
    #[arg(long, env = "SHORTLINK_GEOIP_DB")]
    geoip_db: Option<std::path::PathBuf>,
    /// Record every click as an analytics event (`on`) or only count it (`off`).
    #[arg(long, env = "SHORTLINK_ANALYTICS", value_enum, default_value_t = Switch::On)]
    analytics: Switch,
    /// Redis shared by every instance for the workspace rate limits (`redis://HOST:PORT`);
    /// without it each instance limits on its own.
    #[arg(long, env = "REDIS_URL")]
    redis_url: Option<String>,
    /// Days click events are kept (0 keeps everything).
    #[arg(
        long,
        env = "SHORTLINK_ANALYTICS_RETENTION_DAYS",
        default_value_t = shortlink_service::ANALYTICS_RETENTION.as_secs() / DAY.as_secs()
    )]
    analytics_retention_days: u64,
    /// Days webhook deliveries are kept once delivered or failed, with their attempts (0 keeps
    /// everything).
    #[arg(
        long,
        env = "SHORTLINK_WEBHOOK_DELIVERY_RETENTION_DAYS",
        default_value_t = shortlink_service::DELIVERY_RETENTION.as_secs() / DAY.as_secs()
    )]
    webhook_delivery_retention_days: u64,
}

impl ServeArgs {
    /// Takes each flag that `given_before` says was given before `serve` (where the bare
    /// `shortlink` takes them) from `before`, the flags parsed there; those given after `serve`
    /// are kept, as is whatever neither place was given (a variable or the default, the same in
    /// both).
    fn fill_in(&mut self, before: ServeArgs, given_before: impl Fn(&str) -> bool) {
        macro_rules! fill_in {
            ($($flag:ident),* $(,)?) => {{
                // Every field by name: a flag added to `ServeArgs` and not here does not compile.
                let ServeArgs { $($flag),* } = before;
                // A field's argument id is its name.
                $(if given_before(stringify!($flag)) { self.$flag = $flag; })*
            }};
        }
        fill_in!(
            listen,
            base_url,
            webhook_allow_private_targets,
            webhook_retry_schedule,
            auth_failures_per_minute,
            redirect_index_mib,
            click_fold_seconds,
            root_redirect,
            log_redirects,
            metrics_listen,
            trusted_proxies,
            geoip_db,
            analytics,
            redis_url,
            analytics_retention_days,
            webhook_delivery_retention_days,
        );
    }
}

/// A day, for the retention flags.
const DAY: std::time::Duration = std::time::Duration::from_secs(24 * 60 * 60);

/// A retention of `days` (0: keep everything).
fn days(days: u64) -> Option<std::time::Duration> {
    (days > 0).then(|| DAY.saturating_mul(u32::try_from(days).unwrap_or(u32::MAX)))
}

/// `on` or `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Switch {
    On,
    Off,
}

fn parse_trusted_proxies(s: &str) -> Result<TrustedProxies, String> {
    s.parse()
        .map_err(|e: shortlink_analytics::TrustedProxiesError| e.to_string())
}

/// A `--rate-limit` for the domain to judge: a figure past `u32` is as far out of its range as
/// `u32::MAX`, and gets the domain's message rather than a parser's.
fn per_second(rate_limit: u64) -> u32 {
    u32::try_from(rate_limit).unwrap_or(u32::MAX)
}

#[derive(Debug, Subcommand)]
enum WorkspaceCommand {
    /// Create a workspace; prints its id.
    Create {
        /// Unique name: letters, digits, '.', '-', '_'.
        name: String,
        /// Requests per second for its keys (also the burst), 1 to 1,000,000.
        #[arg(long, default_value_t = DEFAULT_RATE_LIMIT.into())]
        rate_limit: u64,
    },
    /// List workspaces, one per line.
    List,
    /// Change a workspace's rate limit; running servers apply it within seconds.
    Update {
        /// Workspace name or id.
        workspace: String,
        /// Requests per second for its keys (also the burst), 1 to 1,000,000.
        #[arg(long)]
        rate_limit: u64,
    },
}

#[derive(Debug, Subcommand)]
enum KeyCommand {
    /// Create an API key; prints the key alone (shown only this once).
    Create {
        /// Workspace name or id.
        #[arg(long)]
        workspace: String,
        /// A label to tell keys apart.
        #[arg(long, default_value = "default")]
        name: String,
    },
    /// List a workspace's keys (never the secrets).
    List {
        /// Workspace name or id.
        #[arg(long)]
        workspace: String,
    },
    /// Revoke a key by id (`key_…`).
    Revoke {
        /// The key's id.
        key_id: String,
    },
}

fn parse_root_redirect(s: &str) -> Result<RootRedirect, String> {
    RootRedirect::parse(s).map_err(|e| e.to_string())
}

fn parse_base_url(s: &str) -> Result<BaseUrl, String> {
    BaseUrl::parse(s).map_err(|e| e.to_string())
}

impl Cli {
    /// The process's command line; on a usage error, or for `--help` and `--version`, prints
    /// what clap prints and exits.
    pub fn from_command_line() -> Self {
        Self::try_parse_args(std::env::args_os()).unwrap_or_else(|e| e.exit())
    }

    /// `args` (the program's name first) as a command line: [`Parser::try_parse_from`], with
    /// serve's flags given before `serve` filled in ([`ServeArgs::fill_in`]).
    fn try_parse_args<I, T>(args: I) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let matches = Self::command().try_get_matches_from(args)?;
        let mut cli =
            Self::from_arg_matches(&matches).map_err(|e| e.format(&mut Self::command()))?;
        let on_the_line = |m: &clap::ArgMatches, id: &str| {
            m.value_source(id) == Some(clap::parser::ValueSource::CommandLine)
        };
        if let Some((name, _)) = matches.subcommand().filter(|(name, _)| *name != "serve") {
            // `shortlink --listen … workspace list` would otherwise ignore the flag in silence.
            let serve_flags = ServeArgs::augment_args(clap::Command::new("serve"));
            if let Some(flag) = serve_flags
                .get_arguments()
                .find(|arg| on_the_line(&matches, arg.get_id().as_str()))
            {
                let message = format!(
                    "--{} is a flag of serve; `{name}` does not take it\n",
                    flag.get_long().unwrap_or(flag.get_id().as_str())
                );
                return Err(
                    Self::command().error(clap::error::ErrorKind::ArgumentConflict, message)
                );
            }
        }
        if let (Some(Command::Serve(after)), Some(("serve", serve))) =
            (&mut cli.command, matches.subcommand())
        {
            let before = cli.serve.clone();
            after.fill_in(before, |id| {
                on_the_line(&matches, id) && !on_the_line(serve, id)
            });
        }
        Ok(cli)
    }

    /// How log lines are written.
    pub fn log_format(&self) -> LogFormat {
        self.log_format
    }
}

/// Migrates the database for `migrate`, and for `workspace create` when it is new (the first
/// step of a setup); every other command needs the schema this build expects, and changes no
/// schema: run against a database older instances still serve, it would take them out of
/// rotation (their `/readyz` fails on a newer schema), a `key list` included. Returns how many
/// migrations ran.
async fn prepare(store: &Store, command: &Command) -> anyhow::Result<usize> {
    let schema = store
        .schema()
        .await
        .context("could not read the database")?;
    let migrate = match (&schema, command) {
        (_, Command::Migrate) => true,
        (Schema::New { .. }, Command::Workspace(WorkspaceCommand::Create { .. })) => true,
        (Schema::Current, _) => false,
        (Schema::Older { .. }, _) => anyhow::bail!(
            "{schema}: run `shortlink migrate` first (servers of the older build on this database \
             then stop being ready; see DEPLOYMENT.md)"
        ),
        // `migrate` refuses it with the reason.
        (Schema::Newer { .. }, _) => true,
        (Schema::New { .. }, _) => anyhow::bail!(
            "{schema}: `shortlink migrate`, `shortlink serve` or `shortlink workspace create` sets it up"
        ),
    };
    if !migrate {
        return Ok(0);
    }
    store
        .migrate()
        .await
        .context("could not prepare the database")
}

/// Runs the command the user asked for.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    let command = cli.command.unwrap_or(Command::Serve(cli.serve));
    if let Command::Serve(args) = command {
        return serve(cli.database_url, args, cli.log_format).await;
    }
    let options = PoolOptions { max_connections: 2 };
    // Only the commands that make a database may make its file: the others, given a mistyped
    // path, would show an empty database and leave it behind.
    let store = match command {
        Command::Migrate | Command::Workspace(WorkspaceCommand::Create { .. }) => {
            Store::connect(&cli.database_url, options)?
        }
        _ => Store::connect_existing(&cli.database_url, options).map_err(|e| match e {
            // No database at the path: say which commands make one.
            e if e.is_unavailable() => {
                anyhow::anyhow!("{e}; `shortlink serve` or `shortlink workspace create` makes one")
            }
            e => e.into(),
        })?,
    };
    let applied = prepare(&store, &command).await?;
    match command {
        Command::Serve(_) => unreachable!("handled above"),
        Command::Migrate => {
            // A database a newer build migrated has nothing pending here, but is not up to date
            // for this build: its `/readyz` would say so.
            store
                .check_ready()
                .await
                .context("the database is not one this build serves")?;
            println!("applied {applied} migrations; the schema is up to date");
        }
        Command::Workspace(WorkspaceCommand::Create { name, rate_limit }) => {
            println!(
                "{}",
                admin::create_workspace(&store, &name, per_second(rate_limit))
                    .await?
                    .id
            );
        }
        Command::Workspace(WorkspaceCommand::List) => {
            for ws in store.list_workspaces().await? {
                println!(
                    "{}\t{}\t{}/s\t{}",
                    ws.id,
                    shown(&ws.name),
                    ws.rate_limit.per_second(),
                    ws.created_at
                );
            }
        }
        Command::Workspace(WorkspaceCommand::Update {
            workspace,
            rate_limit,
        }) => {
            let workspace = admin::find_workspace(&store, &workspace).await?;
            admin::set_rate_limit(&store, &workspace, per_second(rate_limit)).await?;
            println!("{}\t{rate_limit}/s", workspace.id);
        }
        Command::Key(KeyCommand::Create { workspace, name }) => {
            let workspace = admin::find_workspace(&store, &workspace).await?;
            let (_, secret) = admin::create_key(&store, &workspace, &name).await?;
            println!("{}", secret.expose());
        }
        Command::Key(KeyCommand::List { workspace }) => {
            let workspace = admin::find_workspace(&store, &workspace).await?;
            for key in store.list_api_keys(workspace.id).await? {
                let state = key
                    .revoked_at
                    .map_or_else(|| "active".to_owned(), |t| format!("revoked {t}"));
                println!(
                    "{}\t{}…\t{}\t{}\t{}",
                    key.id,
                    key.prefix,
                    shown(&key.name),
                    key.created_at,
                    state
                );
            }
        }
        Command::Key(KeyCommand::Revoke { key_id }) => {
            let id = ApiKeyId::parse(&key_id)
                .map_err(|_| anyhow::anyhow!("'{key_id}' is not a key id (key_…)"))?;
            anyhow::ensure!(
                store.revoke_api_key(id).await?,
                "no active key with id {key_id}"
            );
            println!("revoked {key_id}");
        }
    }
    Ok(())
}

/// A name as a listing prints it: control characters escaped (`\t`, `\n`, `\u{1b}`), so that
/// a name stored by a build that did not refuse them cannot break a line of tab-separated
/// columns, or forge one.
fn shown(name: &str) -> std::borrow::Cow<'_, str> {
    if !name.chars().any(char::is_control) {
        return name.into();
    }
    name.chars()
        .map(|c| match c.is_control() {
            true => c.escape_default().to_string(),
            false => c.to_string(),
        })
        .collect::<String>()
        .into()
}

async fn serve(database_url: String, args: ServeArgs, log_format: LogFormat) -> anyhow::Result<()> {
    let config = Config {
        listen: args.listen,
        base_url: args.base_url,
        webhook_allow_private_targets: args.webhook_allow_private_targets,
        webhook_retry_schedule: args.webhook_retry_schedule,
        auth_failures_per_minute: args.auth_failures_per_minute,
        redirect_index_mib: args.redirect_index_mib,
        click_fold_interval: std::time::Duration::from_secs(args.click_fold_seconds),
        root_redirect: args.root_redirect,
        log_redirects: args.log_redirects,
        metrics_listen: args.metrics_listen,
        trusted_proxies: args.trusted_proxies,
        redis_url: args.redis_url,
        geoip_db: args.geoip_db,
        analytics: args.analytics == Switch::On,
        analytics_retention: days(args.analytics_retention_days),
        delivery_retention: days(args.webhook_delivery_retention_days),
        ..Config::new(database_url)
    };
    let app = Application::build(config).await?;
    if let Some(key) = app.first_run_key() {
        // A log pipeline reading JSON gets one object, not a framed block of text (the banner
        // after all when `RUST_LOG` filters warnings out: the key is never lost).
        if log_format == LogFormat::Json && tracing::enabled!(tracing::Level::WARN) {
            tracing::warn!(
                workspace = "default",
                api_key = key,
                "first run: created workspace 'default' and this API key; it is shown only this \
                 once, keep it"
            );
        } else {
            eprintln!(
                "{}",
                shortlink_server::first_run_banner(key, app.base_url())
            );
        }
    }
    tracing::info!(
        port = app.port(),
        base_url = app.base_url().as_str(),
        "serving"
    );
    app.run_until_stopped().await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `shortlink ARGS…`, parsed.
    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_args(std::iter::once("shortlink").chain(args.iter().copied()))
    }

    /// The flags `serve` runs with, given `args`.
    fn serve_args(args: &[&str]) -> ServeArgs {
        let cli = parse(args).expect("a valid command line");
        match cli.command {
            None => cli.serve,
            Some(Command::Serve(args)) => args,
            Some(other) => panic!("not serve: {other:?}"),
        }
    }

    #[test]
    fn listed_names_show_control_characters_escaped() {
        assert_eq!(shown("plain name é"), "plain name é");
        assert_eq!(
            shown("tab\there\nkey_FAKE\u{1b}[2J"),
            "tab\\there\\nkey_FAKE\\u{1b}[2J"
        );
    }

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    /// Before `serve` (where the bare `shortlink` takes them) or after it, serve's flags count;
    /// given in both places, the one after `serve` wins.
    #[test]
    fn serve_flags_count_before_and_after_serve() {
        assert_eq!(
            serve_args(&["--listen", "127.0.0.1:1"]).listen,
            "127.0.0.1:1"
        );
        assert_eq!(
            serve_args(&["serve", "--listen", "127.0.0.1:2"]).listen,
            "127.0.0.1:2"
        );
        let mixed = serve_args(&[
            "--listen",
            "127.0.0.1:3",
            "--redis-url",
            "redis://before",
            "serve",
            "--redis-url",
            "redis://after",
            "--log-redirects",
        ]);
        assert_eq!(mixed.listen, "127.0.0.1:3");
        assert_eq!(mixed.redis_url.as_deref(), Some("redis://after"));
        assert!(mixed.log_redirects);
    }

    /// The administration commands take none of serve's flags, and their help lists none.
    #[test]
    fn the_admin_commands_neither_take_nor_list_serve_flags() {
        let refused = parse(&["workspace", "list", "--listen", "127.0.0.1:1"])
            .expect_err("workspace list takes no --listen");
        assert_eq!(refused.kind(), clap::error::ErrorKind::UnknownArgument);
        let refused = parse(&["--listen", "127.0.0.1:1", "workspace", "list"])
            .expect_err("--listen before workspace list is not ignored");
        assert_eq!(refused.kind(), clap::error::ErrorKind::ArgumentConflict);
        assert!(
            refused
                .to_string()
                .contains("--listen is a flag of serve; `workspace` does not take it"),
            "{refused}"
        );
        for command in [
            &["migrate"][..],
            &["workspace"],
            &["workspace", "create"],
            &["workspace", "list"],
            &["workspace", "update"],
            &["key"],
            &["key", "create"],
            &["key", "list"],
            &["key", "revoke"],
        ] {
            let args = [command, &["--help"]].concat();
            let help = parse(&args).expect_err("help is shown").to_string();
            assert!(help.contains("--database-url"), "{command:?}: {help}");
            for serves in ["--listen", "--redis-url", "Options of serve"] {
                assert!(!help.contains(serves), "{command:?} lists {serves}: {help}");
            }
        }
        for command in [&["serve"][..], &[]] {
            let args = [command, &["--help"]].concat();
            let help = parse(&args).expect_err("help is shown").to_string();
            assert!(help.contains("--listen"), "{command:?}: {help}");
            assert!(help.contains("SHORTLINK_LISTEN"), "{command:?}: {help}");
        }
    }
}
