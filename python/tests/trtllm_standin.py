"""A stand-in for TensorRT-LLM's AutoTunerProfilingCache, written from the
format in DESIGN.md: `cache` maps (custom_op, runner_class_name,
str(runner_unique_id), opt_shapes) to (runner_id, tactic, min_time);
`independent_op` holds the ops kept in the `shared` section. Its own
save/load (plain JSON, last writer wins) is what install() replaces."""

import json


class AutoTunerProfilingCache:
    def __init__(self):
        self.cache = {}
        self.independent_op = set()

    def save_cache(self, file_path, rank):
        with open(file_path, "w") as f:
            json.dump({f"rank_{rank}": {str(k): [v[0], repr(v[1]), v[2]] for k, v in self.cache.items()}}, f)

    def load_cache(self, file_path, rank):
        raise NotImplementedError("the stand-in's own loader is never used by the tests")
