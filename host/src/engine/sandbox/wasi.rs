//! The WASI a plugin links against: the `wasm32-wasip2` subset a guest's standard library needs
//! (cli, io, clocks, random), and nothing that can block or reach outside.
//!
//! Why not `wasmtime_wasi::p2::add_to_linker_sync`: its blocking calls (`blocking-write-and-flush`,
//! `poll`, `pollable.block`, stream `drop`, ...) run their async implementation through
//! `wasmtime_wasi::runtime::in_tokio`, which calls `Handle::block_on` when a tokio runtime is
//! current. Plugins run inline on the daemon's tokio worker threads (measured: handing every
//! chain to a blocking thread costs about a quarter of the proxy's throughput), and `block_on`
//! there panics ("Cannot start a runtime from within a runtime"): a guest that printed one line
//! to stderr, as every Rust panic does, dropped the request. So the blocking calls here drive the
//! same async implementations without any runtime: every stream a plugin can reach (captured
//! stdout/stderr, a closed stdin) is always ready, so one poll completes them. The only thing that
//! could ever wait is a clock, and the sandbox's clocks are frozen: a wait on a future instant
//! can never end, so it traps at once as a [`SandboxTrap::Sleep`] instead of hanging a thread
//! where the epoch deadline cannot reach it (host calls are not interruptible).

use super::{HostState, SandboxTrap};
use futures_util::FutureExt;
use std::future::Future;
use wasmtime::component::{HasData, Linker, Resource, ResourceTable};
use wasmtime_wasi::p2::bindings::io::{poll as async_poll, streams as async_streams};
use wasmtime_wasi::p2::bindings::sync::io::{poll, streams};
use wasmtime_wasi::p2::bindings::{cli, clocks, random};
use wasmtime_wasi::p2::{DynInputStream, DynOutputStream, DynPollable, Pollable, StreamResult};
use wasmtime_wasi::WasiView;

/// Add the sandbox's WASI interfaces to `linker`.
pub(crate) fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    use wasmtime_wasi::cli::{WasiCli, WasiCliView};
    use wasmtime_wasi::clocks::{WasiClocks, WasiClocksView};
    use wasmtime_wasi::random::{WasiRandom, WasiRandomView};
    let l = linker;
    clocks::wall_clock::add_to_linker::<HostState, WasiClocks>(l, |s| s.clocks())?;
    clocks::monotonic_clock::add_to_linker::<HostState, Sandbox>(l, Sandbox::of)?;
    random::random::add_to_linker::<HostState, WasiRandom>(l, |s| s.random())?;
    random::insecure::add_to_linker::<HostState, WasiRandom>(l, |s| s.random())?;
    random::insecure_seed::add_to_linker::<HostState, WasiRandom>(l, |s| s.random())?;
    cli::exit::add_to_linker::<HostState, WasiCli>(l, |s| s.cli())?;
    cli::environment::add_to_linker::<HostState, WasiCli>(l, |s| s.cli())?;
    cli::stdin::add_to_linker::<HostState, WasiCli>(l, |s| s.cli())?;
    cli::stdout::add_to_linker::<HostState, WasiCli>(l, |s| s.cli())?;
    cli::stderr::add_to_linker::<HostState, WasiCli>(l, |s| s.cli())?;
    cli::terminal_input::add_to_linker::<HostState, WasiCli>(l, |s| s.cli())?;
    cli::terminal_output::add_to_linker::<HostState, WasiCli>(l, |s| s.cli())?;
    cli::terminal_stdin::add_to_linker::<HostState, WasiCli>(l, |s| s.cli())?;
    cli::terminal_stdout::add_to_linker::<HostState, WasiCli>(l, |s| s.cli())?;
    cli::terminal_stderr::add_to_linker::<HostState, WasiCli>(l, |s| s.cli())?;
    wasmtime_wasi::p2::bindings::io::error::add_to_linker::<HostState, Table>(l, |s| {
        s.ctx().table
    })?;
    poll::add_to_linker::<HostState, Sandbox>(l, Sandbox::of)?;
    streams::add_to_linker::<HostState, Sandbox>(l, Sandbox::of)?;
    Ok(())
}

struct Table;

impl HasData for Table {
    type Data<'a> = &'a mut ResourceTable;
}

/// The view the non-blocking io and clock implementations work on.
pub(crate) struct Sandbox<'a> {
    table: &'a mut ResourceTable,
    /// Why the call is being trapped, for the fault report.
    trap: &'a mut Option<SandboxTrap>,
}

impl HasData for Sandbox<'static> {
    type Data<'a> = Sandbox<'a>;
}

impl Sandbox<'_> {
    fn of(state: &mut HostState) -> Sandbox<'_> {
        Sandbox {
            table: &mut state.table,
            trap: &mut state.trap,
        }
    }
}

/// Complete `f` now: every stream in the sandbox is ready at once, so a future that is not ready
/// after one poll waits on a frozen clock and would never finish.
fn now<T>(trap: &mut Option<SandboxTrap>, f: impl Future<Output = T>) -> Result<T, SandboxTrap> {
    f.now_or_never().ok_or_else(|| {
        *trap = Some(SandboxTrap::Sleep);
        SandboxTrap::Sleep
    })
}

fn now_or_trap<T>(
    trap: &mut Option<SandboxTrap>,
    f: impl Future<Output = wasmtime::Result<T>>,
) -> wasmtime::Result<T> {
    now(trap, f)?
}

fn now_or_stream_trap<T>(
    trap: &mut Option<SandboxTrap>,
    f: impl Future<Output = StreamResult<T>>,
) -> StreamResult<T> {
    now(trap, f).map_err(|t| wasmtime_wasi::p2::StreamError::Trap(t.into()))?
}

impl clocks::monotonic_clock::Host for Sandbox<'_> {
    fn now(&mut self) -> wasmtime::Result<u64> {
        Ok(0)
    }

    fn resolution(&mut self) -> wasmtime::Result<u64> {
        Ok(1_000_000_000)
    }

    fn subscribe_instant(&mut self, when: u64) -> wasmtime::Result<Resource<DynPollable>> {
        self.frozen(when == 0)
    }

    fn subscribe_duration(&mut self, duration: u64) -> wasmtime::Result<Resource<DynPollable>> {
        self.frozen(duration == 0)
    }
}

impl Sandbox<'_> {
    fn frozen(&mut self, due: bool) -> wasmtime::Result<Resource<DynPollable>> {
        let deadline = self.table.push(FrozenDeadline { due })?;
        wasmtime_wasi::p2::subscribe(self.table, deadline)
    }
}

/// A clock wait: ready now (zero or past), or never (time does not move in the sandbox).
struct FrozenDeadline {
    due: bool,
}

#[wasmtime_wasi::async_trait]
impl Pollable for FrozenDeadline {
    async fn ready(&mut self) {
        if !self.due {
            std::future::pending::<()>().await
        }
    }
}

impl poll::Host for Sandbox<'_> {
    fn poll(&mut self, pollables: Vec<Resource<DynPollable>>) -> wasmtime::Result<Vec<u32>> {
        now_or_trap(self.trap, async_poll::Host::poll(self.table, pollables))
    }
}

impl poll::HostPollable for Sandbox<'_> {
    fn ready(&mut self, pollable: Resource<DynPollable>) -> wasmtime::Result<bool> {
        now_or_trap(
            self.trap,
            async_poll::HostPollable::ready(self.table, pollable),
        )
    }

    fn block(&mut self, pollable: Resource<DynPollable>) -> wasmtime::Result<()> {
        now_or_trap(
            self.trap,
            async_poll::HostPollable::block(self.table, pollable),
        )
    }

    fn drop(&mut self, pollable: Resource<DynPollable>) -> wasmtime::Result<()> {
        async_poll::HostPollable::drop(self.table, pollable)
    }
}

impl streams::Host for Sandbox<'_> {
    fn convert_stream_error(
        &mut self,
        err: wasmtime_wasi::p2::StreamError,
    ) -> wasmtime::Result<streams::StreamError> {
        Ok(
            match async_streams::Host::convert_stream_error(self.table, err)? {
                async_streams::StreamError::LastOperationFailed(e) => {
                    streams::StreamError::LastOperationFailed(e)
                }
                async_streams::StreamError::Closed => streams::StreamError::Closed,
            },
        )
    }
}

impl streams::HostOutputStream for Sandbox<'_> {
    fn drop(&mut self, stream: Resource<DynOutputStream>) -> wasmtime::Result<()> {
        now_or_trap(
            self.trap,
            async_streams::HostOutputStream::drop(self.table, stream),
        )
    }

    fn check_write(&mut self, stream: Resource<DynOutputStream>) -> StreamResult<u64> {
        async_streams::HostOutputStream::check_write(self.table, stream)
    }

    fn write(&mut self, stream: Resource<DynOutputStream>, bytes: Vec<u8>) -> StreamResult<()> {
        async_streams::HostOutputStream::write(self.table, stream, bytes)
    }

    fn blocking_write_and_flush(
        &mut self,
        stream: Resource<DynOutputStream>,
        bytes: Vec<u8>,
    ) -> StreamResult<()> {
        now_or_stream_trap(
            self.trap,
            async_streams::HostOutputStream::blocking_write_and_flush(self.table, stream, bytes),
        )
    }

    fn blocking_write_zeroes_and_flush(
        &mut self,
        stream: Resource<DynOutputStream>,
        len: u64,
    ) -> StreamResult<()> {
        now_or_stream_trap(
            self.trap,
            async_streams::HostOutputStream::blocking_write_zeroes_and_flush(
                self.table, stream, len,
            ),
        )
    }

    fn subscribe(
        &mut self,
        stream: Resource<DynOutputStream>,
    ) -> wasmtime::Result<Resource<DynPollable>> {
        async_streams::HostOutputStream::subscribe(self.table, stream)
    }

    fn write_zeroes(&mut self, stream: Resource<DynOutputStream>, len: u64) -> StreamResult<()> {
        async_streams::HostOutputStream::write_zeroes(self.table, stream, len)
    }

    fn flush(&mut self, stream: Resource<DynOutputStream>) -> StreamResult<()> {
        async_streams::HostOutputStream::flush(self.table, stream)
    }

    fn blocking_flush(&mut self, stream: Resource<DynOutputStream>) -> StreamResult<()> {
        now_or_stream_trap(
            self.trap,
            async_streams::HostOutputStream::blocking_flush(self.table, stream),
        )
    }

    fn splice(
        &mut self,
        dst: Resource<DynOutputStream>,
        src: Resource<DynInputStream>,
        len: u64,
    ) -> StreamResult<u64> {
        async_streams::HostOutputStream::splice(self.table, dst, src, len)
    }

    fn blocking_splice(
        &mut self,
        dst: Resource<DynOutputStream>,
        src: Resource<DynInputStream>,
        len: u64,
    ) -> StreamResult<u64> {
        now_or_stream_trap(
            self.trap,
            async_streams::HostOutputStream::blocking_splice(self.table, dst, src, len),
        )
    }
}

impl streams::HostInputStream for Sandbox<'_> {
    fn drop(&mut self, stream: Resource<DynInputStream>) -> wasmtime::Result<()> {
        now_or_trap(
            self.trap,
            async_streams::HostInputStream::drop(self.table, stream),
        )
    }

    fn read(&mut self, stream: Resource<DynInputStream>, len: u64) -> StreamResult<Vec<u8>> {
        async_streams::HostInputStream::read(self.table, stream, len)
    }

    fn blocking_read(
        &mut self,
        stream: Resource<DynInputStream>,
        len: u64,
    ) -> StreamResult<Vec<u8>> {
        now_or_stream_trap(
            self.trap,
            async_streams::HostInputStream::blocking_read(self.table, stream, len),
        )
    }

    fn skip(&mut self, stream: Resource<DynInputStream>, len: u64) -> StreamResult<u64> {
        async_streams::HostInputStream::skip(self.table, stream, len)
    }

    fn blocking_skip(&mut self, stream: Resource<DynInputStream>, len: u64) -> StreamResult<u64> {
        now_or_stream_trap(
            self.trap,
            async_streams::HostInputStream::blocking_skip(self.table, stream, len),
        )
    }

    fn subscribe(
        &mut self,
        stream: Resource<DynInputStream>,
    ) -> wasmtime::Result<Resource<DynPollable>> {
        async_streams::HostInputStream::subscribe(self.table, stream)
    }
}
