"""Batch inference over a dataset of images with tpexport on Ray.

    python python/examples/ray_batch_inference.py MODEL.pt2 [--images N]
        [--batch-size B] [--concurrency C] [--address ray://head:10001]

MODEL.pt2 takes one image batch [batch, C, H, W] (exported with a dynamic
batch); python/tests/fixtures/classifier.pt2 is one ([batch, 1, 8, 8]).
Without --address the script starts a local Ray cluster with --num-cpus
CPUs; with it, it joins a running cluster (every node needs tpexport
installed and MODEL.pt2 at the same path, e.g. on shared storage: each
worker maps the weights from the file). The dataset is synthetic (random
images); the script checks the distributed results against one
single-process call and prints the predicted class counts.
"""

import argparse

import numpy as np
import ray

import tpexport
from tpexport.ray import BatchPredictor


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--images", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--num-cpus", type=int, default=2)
    ap.add_argument("--address", default=None)
    args = ap.parse_args()

    ep = tpexport.load(args.model)
    (shape,) = [tuple(a.shape) for a in ep.example_inputs.values()]
    images = np.random.default_rng(0).standard_normal((args.images,) + shape[1:]).astype(np.float32)

    if args.address:
        ray.init(address=args.address)
    else:
        ray.init(num_cpus=args.num_cpus, include_dashboard=False)
    ds = ray.data.from_items([{"id": i, "image": images[i]} for i in range(len(images))])
    out = ds.map_batches(
        BatchPredictor,
        fn_constructor_kwargs={"path": args.model, "input_columns": ["image"], "output_columns": ["logits"],
                               "keep_columns": True},
        batch_size=args.batch_size,
        batch_format="numpy",
        concurrency=args.concurrency,
    )
    rows = sorted(out.take_all(), key=lambda r: r["id"])
    logits = np.stack([r["logits"] for r in rows])
    ray.shutdown()

    ref = np.concatenate([ep(images[i:i + args.batch_size]) for i in range(0, len(images), args.batch_size)])
    np.testing.assert_allclose(logits, ref, rtol=1e-5, atol=1e-6)
    classes, counts = np.unique(logits.argmax(axis=1), return_counts=True)
    print(f"{len(rows)} images, results equal to a single-process run; predicted classes:",
          dict(zip(classes.tolist(), counts.tolist())))


if __name__ == "__main__":
    main()
