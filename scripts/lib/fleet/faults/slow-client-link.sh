# shellcheck shell=bash
# slow-client-link: one client's link shaped with tbf both ways (its eth0
# and its bridge port), so that client's reads and writes to every server
# slow down while the servers' do not.
FAULT_TARGET[slow-client-link]=client
FAULT_CAUSE[slow-client-link]=network

fault_slow_client_link_start() { fleet_shape_link "$1"; }
fault_slow_client_link_stop() { fleet_unshape_link "$1"; }
