# The accelerator kinds, as core/accelerator.hpp's table lists them (CoreAccelerators.TheBuildsKindsAreTheTables
# holds the two to each other). The components that keep a kind's facts in files of its own build them
# from this list: ami/src/<kind>.cpp with ami/src/recipes/<kind>.cpp for every kind, doctor/src/<kind>.cpp
# for the kinds the doctor probes with the vendor's tools.
set(PCDINO_ACCELERATOR_KINDS nvidia habana neuron)
