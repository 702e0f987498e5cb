"""The real SGLang server on this machine's CPU, for the tests and the demo: the stock `sglang` wheel
from PyPI in a virtual environment of its own (cached once per machine), made to run on the CPU by a
platform plugin (devtools/sglang_cpu_platform), serving the tiny model.

    install  the cached venv: sglang at its pinned version and the plugin
    server   one server process: started on 127.0.0.1, waited on until ready, stopped by its pid
"""
