# The patched verl: fetched, hash-checked, patched and repacked once (workflow/scripts/build_verl.py).
# Editing a patch changes the wheel's name (its local version holds the patch hash), and with it every
# training job that depends on the wheel.
import subprocess
import sys

VERL_LOCAL_VERSION = subprocess.run(
    [
        sys.executable,
        f"{workflow.basedir}/workflow/scripts/build_verl.py",
        "--print-version",
    ],
    check=True,
    capture_output=True,
    text=True,
).stdout.strip()
VERL_WHEEL = f"{S}/build/verl-{VERL_LOCAL_VERSION}-py3-none-any.whl"


rule verl_wheel:
    input:
        patches=sorted(Path(workflow.basedir, "patches/verl").glob("*.patch")),
    output:
        VERL_WHEEL,
    log:
        f"{S}/build/logs/verl_wheel.log",
    localrule: True
    params:
        out=f"{S}/build",
    shell:
        "{sys.executable} {workflow.basedir}/workflow/scripts/build_verl.py --out {params.out} > {log} 2>&1"


# ---------------------------------------------------------------------------------------------------
# Issue 6: the training image (containers/Dockerfile or containers/coolsampler.def), built from the
# patched wheel and the package, and its digest in results/build/image.digest. Config:
#     container: {engine: docker|apptainer|none, image: <docker tag | .sif path>}
# Under the gpu platform with an engine, every training job runs in the image (rule train) and
# records this digest in its run.yaml; the cpu platform (smoke study) never uses it. A local rule:
# building needs the network and, for Apptainer, usually a login node that allows it.
from coolsampler.container import ContainerError, ContainerSpec

try:
    CONTAINER = ContainerSpec.from_config(config)
except ContainerError as err:
    raise WorkflowError(f"invalid study config: {err}") from None
IMAGE_DIGEST = f"{S}/build/image.digest"
# What the image installs that training uses. Only the training side of the package: editing the
# analysis code must not rebuild the image and with it retrain every run.
IMAGE_SOURCES = [
    "containers/install.sh",
    "pyproject.toml",
    "workflow/coolsampler/__init__.py",
    "workflow/coolsampler/rewards.py",
    "workflow/coolsampler/settings.py",
    *sorted(
        str(p)
        for p in Path(workflow.basedir, "workflow/coolsampler/worker").glob("*.py")
    ),
]


def container_inputs():
    """The image digest a training job depends on: gpu platform with an engine only."""
    return {"image": IMAGE_DIGEST} if CONTAINER.enabled and PLATFORM == "gpu" else {}


def container_params():
    """What train_job needs to build the container prefix ({} = run verl directly)."""
    return CONTAINER.as_dict() if CONTAINER.enabled and PLATFORM == "gpu" else {}


if CONTAINER.enabled:

    rule image:
        input:
            definition=(
                "containers/Dockerfile"
                if CONTAINER.engine == "docker"
                else "containers/coolsampler.def"
            ),
            sources=IMAGE_SOURCES,
            wheel=VERL_WHEEL,
        output:
            digest=IMAGE_DIGEST,
            sif=[CONTAINER.image] if CONTAINER.engine == "apptainer" else [],
        log:
            f"{S}/build/logs/image.log",
        localrule: True
        params:
            engine=CONTAINER.engine,
            image=CONTAINER.image,
            version=VERL_LOCAL_VERSION,
        shell:
            "{sys.executable} {workflow.basedir}/workflow/scripts/build_image.py --engine {params.engine}"
            " --image {params.image:q} --verl-version {params.version} --digest-out {output.digest} > {log} 2>&1"

else:

    rule image:
        output:
            IMAGE_DIGEST,
        localrule: True
        run:
            raise WorkflowError(
                "container.engine is none: set container: {engine: docker|apptainer, image: ...} "
                "in the study config or with --config to build the training image"
            )
