# Proof that agent-core is no_std without an allocator: build it for a
# target that has neither.
cargo build -p agent-core --target thumbv7em-none-eabihf --release --locked
