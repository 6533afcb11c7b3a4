# shellcheck shell=bash
# workspace_build PROFILE [CARGO_ARGS...]: builds the workspace's libraries
# (cdylibs included), binaries and examples with cargo profile PROFILE.
#
# Selected as `cargo test --workspace` selects them (the examples bring in
# the dev-dependencies' features, as tests do), so that cargo resolves every
# dependency's features as that run did and reuses what it compiled: after
# the test command's `cargo test` this only links the binaries. A build of
# `-p agent-linux -p service` resolves them apart, and recompiled rustls,
# ring, tokio and the rest (1 min 58 s of a fresh check). The end-to-end
# tests build the same way (tests/src/lib.rs, `build_workspace`).
workspace_build() {
    local profile=$1
    shift
    cargo build --profile "$profile" --locked --workspace --lib --bins --examples "$@"
}

# agent_and_service_build PROFILE: edge-agent and edge-service for the
# fleet testbeds. The dev build is the test command's (workspace_build);
# another profile (release: LTO, one codegen unit) builds just the two
# packages, not every example of the workspace.
agent_and_service_build() {
    if [ "$1" = dev ]; then
        workspace_build dev
    else
        cargo build --profile "$1" --locked -p agent-linux -p service
    fi
}
