//! `swarm worker --listen ADDR`: a worker on another machine (a pod of a Kubernetes Job, a VM),
//! waiting for a coordinator to connect and give it a share of a run.
//!
//! Every connection must open with the shared token (`--token` or `SWARM_WORKER_TOKEN`) or is
//! refused, after a pause that makes guessing slow. One run at a time: a coordinator that
//! connects while another's run is going is refused as busy. With `--once` the process exits
//! after its first run, as a Kubernetes Job's pod must.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use anyhow::Context as _;
use tokio::io::BufReader;
use tokio::net::TcpListener;

use crate::run::worker;

/// Shortest shared token accepted: long enough that guessing it over the network is hopeless.
pub const MIN_TOKEN_LEN: usize = 16;
/// Connections still proving their token at once; more are closed unanswered.
const MAX_PENDING: usize = 16;
/// How long a refused connection is held before it closes.
const REFUSAL_PAUSE: Duration = Duration::from_secs(1);
/// How long a new connection has to say hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

/// Options of `swarm worker --listen`.
#[derive(Debug, Clone)]
pub struct ListenOptions {
    pub listen: String,
    pub token: String,
    /// Exit after the first run.
    pub once: bool,
}

/// Runs the listening worker until killed (or, with `--once`, until its first run is over).
pub fn main(opts: ListenOptions) -> anyhow::Result<()> {
    if opts.token.len() < MIN_TOKEN_LEN {
        anyhow::bail!(
            "a listening worker needs a shared token of at least {MIN_TOKEN_LEN} characters (--token or SWARM_WORKER_TOKEN)"
        );
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("building the worker runtime")?;
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, accept_loop(opts))
}

async fn accept_loop(opts: ListenOptions) -> anyhow::Result<()> {
    let listener = TcpListener::bind(&opts.listen)
        .await
        .with_context(|| format!("cannot listen on {}", opts.listen))?;
    // The bound address on stdout (port 0 picks one), for scripts and tests to read.
    println!("listening {}", listener.local_addr()?);
    eprintln!(
        "swarm worker: listening on {} for a coordinator (holds up to {} players)",
        listener.local_addr()?,
        worker::capacity()
    );
    let token: Rc<str> = opts.token.into();
    let busy = Rc::new(Cell::new(false));
    let pending = Rc::new(Cell::new(0usize));
    let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    // Out of files, mostly: wait rather than spin.
                    eprintln!("swarm worker: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            Some(()) = done_rx.recv() => return Ok(()),
        };
        if pending.get() >= MAX_PENDING {
            continue; // dropped: closes the connection
        }
        // Counted here, not in the task: the check above must see connections not yet polled.
        pending.set(pending.get() + 1);
        let _ = stream.set_nodelay(true);
        let (token, busy, pending, done_tx) = (
            token.clone(),
            busy.clone(),
            pending.clone(),
            done_tx.clone(),
        );
        let once = opts.once;
        tokio::task::spawn_local(async move {
            let (read, mut write) = stream.into_split();
            let mut read = BufReader::new(read);
            let hello =
                tokio::time::timeout(HELLO_TIMEOUT, worker::read_hello(&mut read, Some(&token)));
            let verdict = hello
                .await
                .unwrap_or_else(|_| Err(format!("no hello within {HELLO_TIMEOUT:?}")));
            pending.set(pending.get() - 1);
            // Checked after the token, so only a coordinator holding it learns the worker is busy.
            let verdict = verdict.and_then(|()| {
                if busy.get() {
                    Err("busy: this worker is running another load test".to_string())
                } else {
                    Ok(())
                }
            });
            if let Err(reason) = &verdict {
                eprintln!("swarm worker: refused {peer}: {reason}");
                let _ = worker::answer_hello(&mut write, &verdict).await;
                tokio::time::sleep(REFUSAL_PAUSE).await;
                return;
            }
            busy.set(true);
            let served = match worker::answer_hello(&mut write, &verdict).await {
                Ok(()) => worker::serve_run(read, write).await,
                Err(e) => Err(e.into()),
            };
            busy.set(false);
            match served {
                Ok(true) => {
                    eprintln!("swarm worker: the run for {peer} is over");
                    if once {
                        let _ = done_tx.send(());
                    }
                }
                Ok(false) => eprintln!("swarm worker: {peer} left before starting a run"),
                Err(e) => eprintln!("swarm worker: {peer}: {e:#}"),
            }
        });
    }
}
