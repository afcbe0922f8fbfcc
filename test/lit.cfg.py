# -*- Python -*-
# lit configuration of kiln's FileCheck tests.

import os
import shutil
import subprocess

import lit.formats
from lit.llvm import llvm_config

config.name = "kiln"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.kiln_obj_root, "test")
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py.in", "llama_tiny", "GPU",
                   "Inputs", "ONNXBackend"]

config.environment["FILECHECK_OPTS"] = (
    "-enable-var-scope --allow-unused-prefixes=false")
config.substitutions.append(("%python", "/usr/bin/python3"))
# The kiln Python package, as the build lays it out.
config.environment["PYTHONPATH"] = os.path.join(config.kiln_obj_root, "python")
config.substitutions.append(("%fixtures", config.kiln_fixtures_dir))

# FileCheck, not and count live off PATH on Debian; the kiln tools first.
llvm_config.with_system_environment(["PATH"])
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.kiln_tools_dir, append_path=True)
llvm_config.use_default_substitutions()

# A machine with an NVIDIA GPU runs the tests that need one (ctest -L gpu)
# and skips those that check the behaviour without one.
if shutil.which("nvidia-smi") and subprocess.call(
        ["nvidia-smi", "-L"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) == 0:
    config.available_features.add("gpu")

# The shared fixtures (exported models) are beside the repository, not in it.
if os.path.exists(os.path.join(config.kiln_fixtures_dir, "graphs")):
    config.available_features.add("fixtures")
