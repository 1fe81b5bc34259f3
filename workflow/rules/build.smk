# The patched verl: fetched, hash-checked, patched and repacked once (workflow/scripts/build_verl.py).
# Editing a patch changes the wheel's name (its local version holds the patch hash), and with it every
# training job that depends on the wheel.
import subprocess
import sys

VERL_LOCAL_VERSION = subprocess.run(
    [sys.executable, f"{workflow.basedir}/workflow/scripts/build_verl.py", "--print-version"],
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
