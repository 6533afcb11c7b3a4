# shellcheck shell=bash
# network-hog (research: a third-party node flooding one server's link): the
# target server's link shaped with tbf both ways, its eth0 (what it sends)
# and its bridge port (what it receives). netem is not in this kernel.
FAULT_TARGET[network-hog]=server
FAULT_CAUSE[network-hog]=network

fault_network_hog_start() { fleet_shape_link "$1"; }
fault_network_hog_stop() { fleet_unshape_link "$1"; }
