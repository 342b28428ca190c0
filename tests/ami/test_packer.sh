#!/usr/bin/env bash
# Integration: `pcdino ami generate` for the example specs writes templates that Debian's Packer accepts
# (`packer validate`, HCL2 and the JSON form), scripts and verify.sh that shellcheck accepts, the same
# files that are checked in under ami/examples/, and a verify.sh that reports a node's mismatches.
source "$(dirname "$0")/../lib/assert.sh"
: "${PCDINO_BIN:?}" "${PCDINO_SOURCE_DIR:?}" "${PCDINO_BUILD_DIR:?}"
W="$PCDINO_BUILD_DIR/test-work/ami_packer"
rm -rf "$W" && mkdir -p "$W"
EX="$PCDINO_SOURCE_DIR/ami/examples"

for name in workshop current p5-3.11 trn1 workshop-3.16 cpu-only; do
  run "$PCDINO_BIN" ami generate "$EX/$name.yaml" --out "$W/$name"
  assert_rc 0 "$name: generate"
  run bash -c "cd '$W/$name' && timeout 120 packer validate image.pkr.hcl"
  assert_rc 0 "$name: packer validate image.pkr.hcl"
  run bash -c "cd '$W/$name' && timeout 120 packer validate image.json"
  assert_rc 0 "$name: packer validate image.json"
  run shellcheck "$W/$name"/scripts/*.sh "$W/$name/verify.sh" "$W/$name/ami_cleanup.sh"
  assert_rc 0 "$name: shellcheck on every script, verify.sh and ami_cleanup.sh"
  # The cleanup is the last provisioner of both templates.
  assert_eq "$(grep -o '"scripts/[^"]*"\|"ami_cleanup.sh"' "$W/$name/image.pkr.hcl" | tail -n 1)" '"ami_cleanup.sh"' \
    "$name: image.pkr.hcl runs ami_cleanup.sh last"
  assert_eq "$(grep -o '"scripts/[^"]*"\|"ami_cleanup.sh"' "$W/$name/image.json" | tail -n 1)" '"ami_cleanup.sh"' \
    "$name: image.json runs ami_cleanup.sh last"
  assert_contains "$(cat "$W/$name/plugins.pkr.hcl")" 'source  = "github.com/hashicorp/amazon"' \
    "$name: plugins.pkr.hcl names the amazon plugin for packer init"
  # Packer >= 1.7 reads the folder (plugins included) after `packer init`; Debian's 1.6 has neither.
  if packer init -help >/dev/null 2>&1; then
    run bash -c "cd '$W/$name' && timeout 300 packer init . && timeout 120 packer validate ."
    assert_rc 0 "$name: packer init . && packer validate ."
  else
    echo "note: $(packer version | head -n 1) has no packer init: plugins.pkr.hcl is not validated here"
  fi
  run diff -r "$EX/$name" "$W/$name"
  assert_rc 0 "$name: ami/examples/$name is what the generator writes now (regenerate it if not)"
done

# generate's closing line is the sequence Packer >= 1.7 needs (init installs the amazon plugin), with the
# template's own variables: each -var it names is a variable of image.pkr.hcl, the region the spec's.
run "$PCDINO_BIN" ami generate "$EX/workshop-3.16.yaml" --out "$W/closing"
assert_rc 0 "generate for the closing line"
assert_contains "$OUT" "  cd $W/closing && packer init . && packer validate . && packer build -var region=us-west-2 -var subnet_id=SUBNET_ID ." \
  "generate ends with packer init, validate and build, region and subnet as -var"
while read -r var; do
  assert_contains "$(cat "$W/closing/image.pkr.hcl")" "variable \"$var\" {" "-var $var is a variable of image.pkr.hcl"
done < <(grep -o -- '-var [a-z_]*' <<<"$OUT" | cut -d' ' -f2)
assert_contains "$(grep -A2 'variable "region"' "$W/closing/image.pkr.hcl")" 'default = "us-west-2"' \
  "the template's region defaults to the spec's"
assert_contains "$OUT" "add pcdino's source (scripts/package --source) to files/" "a source-built image asks for the source"
run "$PCDINO_BIN" ami generate "$EX/cpu-only.yaml" --out "$W/closing-package"
assert_contains "$OUT" "add the pcdino package (scripts/package) to files/" "a package image asks for the package"
assert_contains "$OUT" "packer build -var region=eu-west-1 -var subnet_id=SUBNET_ID ." "in its own region"

run "$PCDINO_BIN" ami check "$EX/workshop.yaml"
assert_rc 0 "workshop stack is compatible"
# Trainium: the example passes; what AWS does not support is refused, naming the source.
run "$PCDINO_BIN" ami check "$EX/trn1.yaml"
assert_rc 0 "trn1 stack is compatible"
# Gaudi (issue #70): Intel publishes no fingerprint of its repository's signing key, so nothing is installed
# from it as root: the example is refused, naming the key, and nothing is generated.
run "$PCDINO_BIN" ami check "$EX/dl1.yaml"
assert_rc 78 "the Gaudi example is refused"
assert_contains "$OUT" "no fingerprint of the habana signing key is recorded" "naming the unpinned key"
run "$PCDINO_BIN" ami generate "$EX/dl1.yaml" --out "$W/dl1"
assert_rc 78 "and no Gaudi image is generated"
assert_eq "$(ls "$W/dl1" 2>/dev/null)" "" "no output folder contents for it"
sed 's/gaudi_software: "1.21.0-555"/gaudi_software: "1.22.0-32"/' "$EX/dl1.yaml" >"$W/dl1-122.yaml"
run "$PCDINO_BIN" ami check "$W/dl1-122.yaml"
assert_rc 78 "DL1 with Intel Gaudi software 1.22 is rejected"
assert_contains "$OUT" "first-generation Gaudi (HL-205) is last supported by Intel Gaudi software 1.21" "says why"
sed 's/os: ubuntu2204/os: alinux2023/' "$EX/dl1.yaml" >"$W/dl1-al2023.yaml"
run "$PCDINO_BIN" ami check "$W/dl1-al2023.yaml"
assert_rc 78 "Gaudi on Amazon Linux 2023 is rejected"
assert_contains "$OUT" "Support_Matrix_v1.21.0" "with the support matrix as its source"
sed 's/instance_type: trn1.32xlarge/instance_type: dl1.24xlarge/' "$EX/trn1.yaml" >"$W/trn1-on-dl1.yaml"
run "$PCDINO_BIN" ami check "$W/trn1-on-dl1.yaml"
assert_rc 78 "a Neuron image for a Gaudi node is rejected"
sed 's/nvidia_driver: "510.47.03"/nvidia_driver: "470.57.02"/' "$EX/workshop.yaml" >"$W/old-driver.yaml"
run "$PCDINO_BIN" ami check "$W/old-driver.yaml"
assert_rc 78 "an incompatible driver/CUDA pair is rejected"
assert_contains "$OUT" "versions.nvidia_driver 470.57.02 and versions.cuda 11.6 do not work together" "message names both"
run "$PCDINO_BIN" ami generate "$W/old-driver.yaml" --out "$W/never"
assert_rc 78 "and nothing is generated for it"
assert_eq "$(ls "$W/never" 2>/dev/null)" "" "no output folder contents"

# p5 (NVSwitches) with a new driver and the base AMI's Fabric Manager: refused; with its own: accepted.
grep -v 'fabric_manager' "$EX/p5-3.11.yaml" >"$W/p5-no-fm.yaml"
run "$PCDINO_BIN" ami check "$W/p5-no-fm.yaml"
assert_rc 78 "a p5 driver change without its Fabric Manager is rejected"
assert_contains "$OUT" "replacing the driver needs versions.fabric_manager" "naming the key to pin"
run "$PCDINO_BIN" ami check "$EX/p5-3.11.yaml"
assert_rc 0 "with Fabric Manager pinned to the driver it is accepted"
# The default (ParallelCluster 3.16.3) keeps the AMI's driver, so its Fabric Manager is the driver's.
run "$PCDINO_BIN" ami check "$EX/current.yaml"
assert_rc 0 "the 3.16.3 example keeps the AMI's driver and Fabric Manager"
assert_contains "$OUT" "compatible (nvidia on ubuntu2204, ParallelCluster 3.16.3)" "on 3.16.3"
assert_not_contains "$(ls "$W/current/scripts")" "15-fabric-manager.sh" "and installs no Fabric Manager"
sed 's/nvidia_driver: "595.112.07"/nvidia_driver: "580.126.20"/' "$EX/current.yaml" >"$W/p5-316-580.yaml"
run "$PCDINO_BIN" ami check "$W/p5-316-580.yaml"
assert_rc 78 "another driver on 3.16.3's p5 without its Fabric Manager is rejected"
assert_contains "$OUT" "the base AMI's Fabric Manager 595.112.07" "naming the AMI's"

# verify.sh on this machine (no GPU, no EFA, no enroot): every missing component is reported, exit 1.
run env MANIFEST="$W/workshop/files/manifest.json" bash "$W/workshop/verify.sh"
assert_rc 1 "verify.sh fails on a machine that is not the image"
for c in nvidia_driver cuda nccl efa_installer enroot spank_pcdino; do
  assert_contains "$OUT" "MISMATCH $c" "verify.sh reports $c"
done
finish
