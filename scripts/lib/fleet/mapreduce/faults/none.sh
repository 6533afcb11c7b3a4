# shellcheck shell=bash
# none: no fault (the control). Any finding in its phase is a false positive.
FAULT_TARGET[none]=none
FAULT_CAUSE[none]=none

fault_none_start() { :; }
fault_none_stop() { :; }
