#!/usr/bin/python3
"""ParallelCluster's own verdict on the cases of pcluster_corpus.yaml (a check by hand, not part of CI).

Loads each edited configuration with ParallelCluster's ClusterSchema and runs its validators with every
AWS call failing (a few lookups are answered with fixed facts: instance types from pcdino's catalogue,
one AZ per subnet, an AMI), then prints ACCEPT or REJECT with the offline ERROR findings, and whether the
corpus agrees. Needs ParallelCluster's sources and Debian's python3-marshmallow, python3-boto3:
    git -C aws-parallelcluster archive v3.11.1 cli/src | tar -x -C /tmp/pc
    PCLUSTER_SRC=/tmp/pc/cli/src tests/cluster/pcluster_verdict.py [case name substring]
"""
import os
import re
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ.setdefault("AWS_ACCESS_KEY_ID", "offline")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "offline")
sys.path.insert(0, os.environ.get("PCLUSTER_SRC", "/tmp/pc/cli/src"))

import pcluster.aws.aws_api as aws_api  # noqa: E402
from pcluster.aws.aws_resources import FsxStorageInfo, ImageInfo, InstanceTypeInfo  # noqa: E402
from pcluster.aws.common import AWSClientError  # noqa: E402
from pcluster.schemas.cluster_schema import ClusterSchema  # noqa: E402
from pcluster.validators.common import ValidatorContext  # noqa: E402

# name -> vCPUs, GiB, GPUs, EFA, instance store disks, from pcdino's catalogue.
TYPES = {}
for m in re.finditer(r'\{"([a-z0-9.]+)", (\d+), ([\d.]+), (\d+), "[^"]*", (true|false), \d+, (\d+),',
                     open(os.path.join(ROOT, "cluster/src/catalogue.cpp")).read()):
    TYPES[m.group(1)] = (int(m.group(2)), float(m.group(3)), int(m.group(4)), m.group(5) == "true", int(m.group(6)))


def type_info(name):
    v, mem, gpus, efa, disks = TYPES.get(name, (4, 8, 0, False, 0))
    d = {"InstanceType": name, "VCpuInfo": {"DefaultVCpus": v, "DefaultCores": max(1, v // 2), "DefaultThreadsPerCore": 2},
         "MemoryInfo": {"SizeInMiB": int(mem * 1024)}, "ProcessorInfo": {"SupportedArchitectures": ["x86_64"]},
         "NetworkInfo": {"EfaSupported": efa, "MaximumNetworkCards": 1,
                         "NetworkCards": [{"NetworkCardIndex": 0, "MaximumNetworkInterfaces": 4}]},
         "InstanceStorageSupported": disks > 0, "EbsInfo": {"EbsOptimizedSupport": "default"},
         "SupportedUsageClasses": ["on-demand", "spot", "capacity-block"],
         "PlacementGroupInfo": {"SupportedStrategies": ["cluster", "partition", "spread"]}}
    if gpus:
        d["GpuInfo"] = {"Gpus": [{"Name": "X", "Manufacturer": "NVIDIA", "Count": gpus, "MemoryInfo": {"SizeInMiB": 16384}}]}
    return InstanceTypeInfo(d)


class Offline:
    def __init__(self, service):
        self.service = service

    def describe_capacity_reservations(self, ids):
        return []

    def get_instance_type_info(self, name):
        return type_info(name)

    def describe_volumes(self, ids):  # FSx ONTAP/OpenZFS volumes: each on a file system of its own
        return [{"VolumeId": i, "FileSystemId": "fs-" + i[-17:]} for i in ids]

    def get_file_systems_info(self, ids):  # existing file systems: Lustre, in the first subnet's AZ
        return [FsxStorageInfo({"FileSystemId": i, "FileSystemType": "LUSTRE", "SubnetIds": ["subnet-0123456789abcdef0"],
                                "LustreConfiguration": {"MountName": "m"}, "DNSName": i + ".fsx"}) for i in ids]

    def get_official_image_id(self, *a, **k):
        return "ami-0123456789abcdef0"

    def describe_image(self, ami=None, ami_id=None):
        return ImageInfo({"ImageId": ami or ami_id, "RootDeviceName": "/dev/xvda", "Architecture": "x86_64", "Tags": [],
                          "BlockDeviceMappings": [{"DeviceName": "/dev/xvda", "Ebs": {"VolumeSize": 35}}]})

    def get_subnets_az_mapping(self, ids):
        return {s: "us-east-1" + "abcdefgh"[int(s[-1], 16) % 8] for s in ids}

    def get_subnet_avail_zone(self, subnet):
        return self.get_subnets_az_mapping([subnet])[subnet]

    def __getattr__(self, name):
        def fail(*a, **k):
            raise AWSClientError(name, "offline: " + self.service + "." + name)
        return fail


class OfflineApi:
    def __getattr__(self, service):
        return Offline(service)


aws_api.AWSApi.instance = staticmethod(lambda: OfflineApi())
# Validators whose verdict needs AWS answers the offline stand-ins cannot give.
NEEDS_AWS = {"CapacityReservationValidator", "CapacityReservationSizeValidator", "HeadNodeLaunchTemplateValidator",
             "ComputeResourceLaunchTemplateValidator", "CustomAmiTagValidator", "CapacityReservationResourceGroupValidator"}


def render(text):
    return (text.replace("${PUBLIC_SUBNET_ID}", "subnet-0123456789abcdef0")
            .replace("${PRIVATE_SUBNET_ID}", "subnet-0123456789abcdef1")
            .replace("${EFA_SECURITY_GROUP_ID}", "sg-0123456789abcdef0"))


def edited(case):
    text = open(os.path.join(ROOT, "cluster/examples", case["base"], "cluster-config.yaml")).read()
    if case.get("render", True):
        text = render(text)
    for old, new in case.get("replace", []):
        assert old in text, (case["name"], old)
        text = text.replace(old, new, 1)
    if "repeat" in case:
        after, block, count = case["repeat"]
        text = text.replace(after, after + "".join(block.replace("{n}", str(n)) for n in range(1, count + 1)), 1)
    return text


def verdict(text):
    try:
        config = ClusterSchema(cluster_name="c").load(yaml.safe_load(text))
    except Exception as e:  # marshmallow ValidationError, or a YAML error
        return "reject", str(e)[:300]
    failures = config.validate(context=ValidatorContext())
    errors = [f"{f.validator_type}: {f.message[:200]}" for f in failures
              if f.level.name == "ERROR" and f.validator_type not in NEEDS_AWS
              and "offline:" not in f.message and "Could not connect" not in f.message]
    return ("reject", "; ".join(errors)) if errors else ("accept", "")


def main():
    corpus = yaml.safe_load(open(os.path.join(HERE, "pcluster_corpus.yaml")))
    wanted = sys.argv[1] if len(sys.argv) > 1 else ""
    disagree = 0
    for case in corpus["cases"]:
        if wanted not in case["name"]:
            continue
        got, why = verdict(edited(case))
        agree = got == case["verdict"]
        disagree += 0 if agree else 1
        print(f"{'ok  ' if agree else 'DIFF'} {got:6} {case['name']}" + (f"\n       {why}" if why else ""))
    print(f"{disagree} disagreement(s)")
    return 1 if disagree else 0


if __name__ == "__main__":
    sys.exit(main())
