//! How a command reaches the machine manager: the connection flags every client command
//! flattens in, the state directory they name, and who is asking.

use std::path::PathBuf;

use cosched_client::bcast::Staging;
use cosched_client::client::Client;
use cosched_proto::StateDir;
use cosched_proto::config::ClusterConfig;
use cosched_proto::proto::Scope;

/// How to reach the machine manager.
#[derive(clap::Args, Clone, Default)]
pub struct ConnArgs {
    /// Machine manager address HOST:PORT (default: from $COSCHED_STATE_DIR/mm.addr)
    #[arg(long)]
    pub(crate) mm: Option<String>,
    /// Cluster key file (default: $COSCHED_STATE_DIR/key)
    #[arg(long)]
    pub(crate) key_file: Option<PathBuf>,
    /// Your user credential (from `cosched cluster user-key`): talk to the machine manager
    /// over TCP as that user, without the cluster key
    #[arg(long, conflicts_with = "key_file")]
    pub(crate) user_key: Option<PathBuf>,
    /// The cluster's configuration file, for the head address and the key [default:
    /// $COSCHED_CONFIG, else /etc/cosched/cosched.toml if it exists]
    #[arg(long, value_name = "PATH")]
    pub(crate) config: Option<PathBuf>,
    /// Print one JSON document instead of a table
    #[arg(long)]
    pub(crate) json: bool,
}

impl ConnArgs {
    /// How a broadcast over this connection is staged: whose copy it is follows the rule of
    /// submissions (this process's user, named; with a user credential, the credential's).
    pub(crate) fn staging(&self, dest: Option<&str>, scope: Scope) -> Staging {
        Staging {
            dest: dest.map(str::to_string),
            scope,
            user: self.user_key.is_none().then(current_uid),
        }
    }

    /// A client of the machine manager: `--mm` and `--key-file` if given; else its local
    /// socket in the state directory if there is one; else the configuration's `head` and
    /// `key`; else the state directory's `mm.addr` and `key`.
    pub(crate) fn client(&self) -> anyhow::Result<Client> {
        let conf = ClusterConfig::find(self.config.as_deref())?;
        let mm = self
            .mm
            .clone()
            .or_else(|| conf.as_ref().and_then(|c| c.head.clone()));
        if let Some(file) = &self.user_key {
            let cred = cosched_proto::user_key::UserKey::load(file)?;
            let addr = match mm {
                Some(a) => a,
                None => StateDir::from_env().addr()?,
            };
            return Ok(Client::with_user_key(addr, cred, file));
        }
        let key = self
            .key_file
            .clone()
            .or_else(|| conf.as_ref().and_then(|c| c.key.clone()));
        let dir = state_dir(None, conf.as_ref());
        if self.mm.is_none() && self.key_file.is_none() && dir.sock_file().exists() {
            // On the head node: the machine manager's socket, where the kernel vouches for
            // the user, before the cluster key (which users cannot read).
            return Ok(Client::from_state_dir(&dir, None, None)?);
        }
        Ok(Client::from_state_dir(&dir, mm.as_deref(), key.as_deref())?)
    }
}

/// The state directory: `--state-dir`, else $COSCHED_STATE_DIR, else the configuration's
/// `state_dir`, else the default.
pub(crate) fn state_dir(flag: Option<PathBuf>, conf: Option<&ClusterConfig>) -> StateDir {
    let from_conf = conf
        .and_then(|c| c.state_dir.clone())
        .filter(|_| std::env::var_os("COSCHED_STATE_DIR").is_none());
    flag.or(from_conf)
        .map_or_else(StateDir::from_env, StateDir::new)
}

pub(crate) fn current_uid() -> u32 {
    // /proc/self belongs to this process's user.
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self")
        .map(|m| m.uid())
        .unwrap_or(0)
}

/// Now, as the daemons count time.
pub(crate) fn now_us() -> i64 {
    cosched_proto::util::now().as_micros()
}
