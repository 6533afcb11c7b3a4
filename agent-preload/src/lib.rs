//! `libedge_preload.so`: what `edge-agent run --backend preload` puts in
//! the command's `LD_PRELOAD`. It exports agent-inproc's wrappers under
//! libc's names, so the dynamic linker binds the program's libc calls to
//! them, and at load maps the run's table (the file named by
//! `EDGE_AGENT_PRELOAD_TABLE`, made by the agent) shared and records into
//! it. Without that variable, or with a table of another build, it records
//! nothing and every wrapper passes straight through.
//!
//! The whole crate is an FFI layer (exported C functions, a constructor,
//! raw system calls before anything is set up), so it may use `unsafe`;
//! every block says why it is sound.
#![allow(unsafe_code)]

mod table_file;

/// The wrappers, under libc's names.
mod exports {
    agent_inproc::libc_wrappers!(#[no_mangle]);
}

/// Run at load, before the program's `main`: joins the run, if there is
/// one.
#[used]
#[link_section = ".init_array"]
static JOIN_AT_LOAD: extern "C" fn() = join_run;

extern "C" fn join_run() {
    let Some(table) = table_file::map_from_env() else {
        return;
    };
    // A new image of a process already in the run (after its `execve`) is
    // not a new process; anything else is.
    if !agent_inproc::observe::exec_arrived_counted(table) {
        agent_inproc::observe::process_joined(table);
    }
    // SAFETY: the handler is a plain function that only resets this
    // thread's cached id and counts the process; registering may allocate,
    // which is fine here (load time, not a wrapper).
    unsafe { libc::pthread_atfork(None, None, Some(forked_child)) };
    agent_inproc::activate(table);
}

extern "C" fn forked_child() {
    if let Some(table) = agent_inproc::active_table() {
        agent_inproc::observe::process_joined(table);
    }
}
