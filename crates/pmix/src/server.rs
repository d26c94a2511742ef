//! The server: started once per process, jobs registered as namespaces, ranks registered
//! and given their environment, and the calls answering another node's direct modex.
#![forbid(unsafe_code)]

use std::cell::Cell;
use std::ffi::CString;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::Error;
use crate::event::Event;
use crate::layout::JobLayout;
use crate::status::Status;
use crate::sys;

/// What Open MPI 4.x needs besides the PMIx variables to take a directly started rank for one
/// of a job. Its `schizo` framework knows Slurm, Flux and LSF by their own variables and,
/// without them, declares every rank a singleton (`MPI_Comm_size` = 1) even with a PMIx
/// server in its environment: excluding the `orte` component, whose only verdict outside
/// `mpirun` is "singleton", lets the `pmi` start-up (PMIx) be chosen. The `slurm` component
/// goes too: cosched gives ranks Slurm's job variables (`SLURM_JOBID`, ...) but no
/// `SLURM_STEP_ID`, which that component reads as "inside an allocation, not started by
/// srun", a singleton again. The node manager places
/// and binds ranks itself, so Open MPI must not bind them again (as Slurm and Flux ask).
/// Open MPI 5 and other PMIx clients ignore these.
pub const OPEN_MPI_ENV: [(&str, &str); 3] = [
    ("OMPI_MCA_schizo", "^orte,slurm"),
    ("OMPI_MCA_hwloc_base_binding_policy", "none"),
    ("OMPI_MCA_orte_externally_bound", "1"),
];

/// What Open MPI needs when a node runs more of its ranks than it has cores (8 ranks on 2
/// cores, or jobs sharing cores): wait by yielding the CPU instead of spinning on it. `mpirun`
/// sets it itself when it oversubscribes a node; directly started ranks only know it from
/// their environment. Spinning ranks that share a core ran an 8-rank ring 9x slower here.
pub const OPEN_MPI_OVERSUBSCRIBED: (&str, &str) = ("OMPI_MCA_mpi_yield_when_idle", "1");

/// The datastore a rank's PMIx client is told to use (`PMIX_GDS_MODULE`), in place of the
/// list `PMIx_server_setup_fork` offers, which puts the shared-memory stores (ds21, ds12)
/// first. With those, OpenPMIx 4.2's server files a committed key of global scope twice:
/// for the node in the committing rank's shared-memory store, for other nodes in its own
/// hash store. A rank's `PMIx_Get` for a key of a rank on its node that it found in neither
/// store is sent to the server, and if the server reads that request after the rank's
/// commit, it finds the key in its hash store under the other nodes' scope and answers
/// "not found" at once, without looking in the shared-memory store (`pmix_server_get`
/// returns on `PMIX_ERR_EXISTS_OUTSIDE_SCOPE`; so do 4.2.9 and later). Open MPI's
/// asynchronous modex (no fence in `MPI_Init`) runs into that window, and `MPI_Init` fails
/// with "PML add procs failed ... Not found". With every rank on "hash", a commit lands in
/// the one store the server searches, under both scopes, and a request read before the
/// commit waits for it.
const CLIENT_DATASTORE: (&str, &str) = ("PMIX_GDS_MODULE", "hash");

/// Set once a server was started in this process. OpenPMIx's server state is process-wide,
/// and none of its hosts (Slurm's step daemon, Flux's job shell, PRRTE's daemons) starts it
/// twice in one process, so a restart after finalize is not relied on: one start per process.
static STARTED: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// True on OpenPMIx's progress thread while it runs the caller's sink.
    static IN_SINK: Cell<bool> = const { Cell::new(false) };
}

/// OpenPMIx's server in this process. Every method may be called from any thread except
/// from inside the event sink (the library's progress thread), where the blocking ones
/// refuse with [`Error::OnProgressThread`].
pub struct Server {
    installed: Mutex<Option<sys::Installed>>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").finish_non_exhaustive()
    }
}

fn c(what: &'static str, s: &str) -> Result<CString, Error> {
    CString::new(s).map_err(|_| Error::Nul {
        what,
        value: s.into(),
    })
}

fn check(call: impl FnOnce() -> String, rc: i32) -> Result<(), Error> {
    if rc == 0 {
        Ok(())
    } else {
        Err(Error::Pmix {
            call: call(),
            status: Status(rc),
        })
    }
}

fn not_in_sink(call: &'static str) -> Result<(), Error> {
    if IN_SINK.with(Cell::get) {
        Err(Error::OnProgressThread { call })
    } else {
        Ok(())
    }
}

impl Server {
    /// Starts OpenPMIx's server (`PMIx_server_init`): its rendezvous files and shared
    /// datastore go in `tmpdir`, the server's own directory, which no other user may write;
    /// `node` is this node's host name as the jobs name it. The server listens on loopback
    /// TCP and trusts the ids a client claims (see docs/daemons.md, "PMIx"): run it as the
    /// user whose ranks it serves. Events go to `sink`, called
    /// on the library's progress thread: it should only pass them on (a channel's `send`).
    ///
    /// One server per process, for the life of the process: a second start, also after
    /// [`Server::shutdown`], is [`Error::AlreadyStarted`]. In a build without OpenPMIx this is
    /// [`Error::NotBuilt`].
    pub fn start(
        tmpdir: &Path,
        node: &str,
        sink: impl Fn(Event) + Send + Sync + 'static,
    ) -> Result<Server, Error> {
        if !sys::AVAILABLE {
            return Err(Error::NotBuilt);
        }
        let dir = tmpdir.to_str().ok_or_else(|| Error::Nul {
            what: "the server's directory (not UTF-8)",
            value: tmpdir.display().to_string(),
        })?;
        let (dir, host) = (c("the server's directory", dir)?, c("the node name", node)?);
        if STARTED.swap(true, Ordering::SeqCst) {
            return Err(Error::AlreadyStarted);
        }
        let handler = move |raw: crate::event::RawEvent| {
            if let Some(ev) = raw.into_event() {
                IN_SINK.with(|f| f.set(true));
                sink(ev);
                IN_SINK.with(|f| f.set(false));
            }
        };
        let installed = sys::init(&dir, &host, Box::new(handler)).map_err(|rc| Error::Pmix {
            call: format!("PMIx_server_init (directory {})", tmpdir.display()),
            status: Status(rc),
        })?;
        Ok(Server {
            installed: Mutex::new(Some(installed)),
        })
    }

    /// OpenPMIx's version string, e.g. "OpenPMIx 4.2.2rc2, ...".
    pub fn version() -> String {
        sys::version()
    }

    /// Registers the job's namespace on this node (`PMIx_server_register_nspace`), with the
    /// records [`JobLayout::registration`] lists; `host` is this node as the layout names it,
    /// `tmpdir` the job's scratch directory here, if it has one. Before any of its ranks
    /// start.
    pub fn register_job(
        &self,
        layout: &JobLayout,
        host: &str,
        tmpdir: Option<&Path>,
    ) -> Result<(), Error> {
        not_in_sink("register_job")?;
        let node = layout.node_id(host)?;
        let tmp = match tmpdir {
            Some(d) => Some(d.to_str().ok_or_else(|| Error::Nul {
                what: "the job's directory (not UTF-8)",
                value: d.display().to_string(),
            })?),
            None => None,
        };
        if let Some(t) = tmp {
            c("the job's directory", t)?;
        }
        let ns = c("the namespace", layout.nspace())?;
        let infos = layout.registration(node, tmp);
        let nlocal = layout.local_ranks(node).len() as u32;
        check(
            || format!("PMIx_server_register_nspace({})", layout.nspace()),
            sys::register_nspace(&ns, nlocal, &infos),
        )
    }

    /// Forgets a namespace (`PMIx_server_deregister_nspace`), once its ranks are gone.
    pub fn deregister_job(&self, nspace: &str) -> Result<(), Error> {
        not_in_sink("deregister_job")?;
        let ns = c("the namespace", nspace)?;
        check(
            || format!("PMIx_server_deregister_nspace({nspace})"),
            sys::deregister_nspace(&ns),
        )
    }

    /// Registers a local rank that will run as `uid`/`gid` (`PMIx_server_register_client`):
    /// the library accepts its connection only from a client presenting those ids (over
    /// OpenPMIx 4's loopback TCP, ids the client claims).
    pub fn register_client(
        &self,
        nspace: &str,
        rank: u32,
        uid: u32,
        gid: u32,
    ) -> Result<(), Error> {
        not_in_sink("register_client")?;
        let ns = c("the namespace", nspace)?;
        check(
            || format!("PMIx_server_register_client({nspace}:{rank})"),
            sys::register_client(&ns, rank, uid, gid),
        )
    }

    /// Forgets a local rank (`PMIx_server_deregister_client`), once it has exited.
    pub fn deregister_client(&self, nspace: &str, rank: u32) -> Result<(), Error> {
        not_in_sink("deregister_client")?;
        let ns = c("the namespace", nspace)?;
        check(
            || format!("PMIx_server_deregister_client({nspace}:{rank})"),
            sys::deregister_client(&ns, rank),
        )
    }

    /// The environment to give a registered rank (`PMIx_server_setup_fork`): the variables
    /// its PMIx client reads to find this server (`PMIX_NAMESPACE`, `PMIX_RANK`,
    /// `PMIX_SERVER_URI*`, the security module...), the datastore it must use (OpenPMIx's
    /// hash store: see `CLIENT_DATASTORE`), then [`OPEN_MPI_ENV`], to set over the job's own.
    pub fn client_env(&self, nspace: &str, rank: u32) -> Result<Vec<(String, String)>, Error> {
        not_in_sink("client_env")?;
        let ns = c("the namespace", nspace)?;
        let vars = sys::setup_fork(&ns, rank).map_err(|rc| Error::Pmix {
            call: format!("PMIx_server_setup_fork({nspace}:{rank})"),
            status: Status(rc),
        })?;
        Ok(vars
            .into_iter()
            .filter_map(|kv| {
                let (k, v) = kv.split_once('=')?;
                Some((k.to_owned(), v.to_owned()))
            })
            .filter(|(k, _)| k != CLIENT_DATASTORE.0)
            .chain(
                std::iter::once(&CLIENT_DATASTORE)
                    .chain(&OPEN_MPI_ENV)
                    .map(|(k, v)| (k.to_string(), v.to_string())),
            )
            .collect())
    }

    /// Asks for what a rank of this node put, to answer another node's
    /// [`Event::DirectModex`]: the answer comes as [`Event::LocalModex`] with `tag`, once the
    /// rank has committed its data. Does not block, so the sink may call it.
    pub fn local_modex(&self, nspace: &str, rank: u32, tag: u64) -> Result<(), Error> {
        let ns = c("the namespace", nspace)?;
        check(
            || format!("PMIx_server_dmodex_request({nspace}:{rank})"),
            sys::local_modex(&ns, rank, tag),
        )
    }

    /// Stops the server (`PMIx_server_finalize`): connected ranks lose it. No server can be
    /// started in this process afterwards. Dropping the server does the same.
    pub fn shutdown(self) -> Result<(), Error> {
        not_in_sink("shutdown")?;
        self.finalize()
    }

    fn finalize(&self) -> Result<(), Error> {
        let installed = self
            .installed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        match installed {
            Some(i) => check(|| "PMIx_server_finalize".into(), sys::finalize(i)),
            None => Ok(()),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // From the sink, finalize would wait for the thread running it; the process is then
        // ending with the server in place, which the library tolerates.
        if !IN_SINK.with(Cell::get) {
            let _ = self.finalize();
        }
    }
}
