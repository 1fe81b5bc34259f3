# The patched verl: fetched, hash-checked, patched and repacked once (workflow/scripts/build_verl.py).
# The training image (containers/Dockerfile or containers/coolsampler.def) built from that wheel and
# the package, its digest in results/build/image.digest. Constants and helpers: common.smk.


rule verl_wheel:
    input:
        # ancient: the output's name carries the patches' hash, so a changed patch is a new wheel,
        # and a clone (new file times) rebuilds nothing
        patches=[
            ancient(p)
            for p in sorted(Path(workflow.basedir, "patches/verl").glob("*.patch"))
        ],
    output:
        VERL_WHEEL,
    log:
        f"{LAYOUT.build}/logs/verl_wheel.log",
    localrule: True
    params:
        python=sys.executable,
        script=f"{workflow.basedir}/workflow/scripts/build_verl.py",
        out=lambda wildcards, output: Path(output[0]).parent,
    shell:
        "{params.python} {params.script} --out {params.out} > {log} 2>&1"


if CONTAINER.enabled:

    rule image:
        input:
            # the engine's definition, install.sh, check_image.py, the lock, pyproject.toml and the
            # package files training imports (common.smk: IMAGE_SOURCES, derived from the imports)
            # ancient (a clone's new file times rebuild nothing): a change of their content is a
            # new image-inputs.<hash>.json (rule image_inputs), a change of a patch a new wheel
            sources=[ancient(f) for f in IMAGE_SOURCES],
            wheel=ancient(VERL_WHEEL),
            key=ancient(IMAGE_INPUTS),
        output:
            digest=IMAGE_DIGEST,
            sif=[CONTAINER.image] if CONTAINER.engine == "apptainer" else [],
        log:
            f"{LAYOUT.build}/logs/image.log",
        localrule: True
        params:
            engine=CONTAINER.engine,
            image=CONTAINER.image,
            version=VERL_LOCAL_VERSION,
            python=sys.executable,
            script=f"{workflow.basedir}/workflow/scripts/build_image.py",
        shell:
            "{params.python} {params.script} --engine {params.engine}"
            " --image {params.image:q} --verl-version {params.version} --digest-out {output.digest} > {log} 2>&1"

    # The content of what the image is built from, in a file whose name is its hash (coolsampler.train.rerun).
    rule image_inputs:
        output:
            IMAGE_INPUTS,
        log:
            f"{LAYOUT.build}/logs/image_inputs.log",
        localrule: True
        params:
            digests=IMAGE_INPUT_DIGESTS,
        run:
            write_digests(output[0], params.digests, log[0])

else:

    rule image:
        output:
            IMAGE_DIGEST,
        log:
            f"{LAYOUT.build}/logs/image.log",
        localrule: True
        run:
            raise WorkflowError(
                "container.engine is none: set container: {engine: docker|apptainer, image: ...} "
                "in the study config or with --config to build the training image"
            )
