"""The build backend of the source tree's root pyproject.toml.

`pip install .` at the root of the Locus tree builds the Python package
of bindings/python: the root's meson.build is the C library's, so this
backend runs meson-python in bindings/python (which takes the library
from the tree as its subproject) with every path pip hands it made
absolute first. It adds nothing else; `pip install ./bindings/python`
is the same build (docs/PYTHON.md).
"""
import contextlib
import os

import mesonpy

_PACKAGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir)


@contextlib.contextmanager
def _in_package():
    here = os.getcwd()
    os.chdir(_PACKAGE)
    try:
        yield
    finally:
        os.chdir(here)


def _absolute(path):
    return None if path is None else os.path.abspath(path)


def get_requires_for_build_wheel(config_settings=None):
    with _in_package():
        return mesonpy.get_requires_for_build_wheel(config_settings)


def get_requires_for_build_sdist(config_settings=None):
    with _in_package():
        return mesonpy.get_requires_for_build_sdist(config_settings)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    wheel_directory = _absolute(wheel_directory)
    metadata_directory = _absolute(metadata_directory)
    with _in_package():
        return mesonpy.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_sdist(sdist_directory, config_settings=None):
    sdist_directory = _absolute(sdist_directory)
    with _in_package():
        return mesonpy.build_sdist(sdist_directory, config_settings)


def get_requires_for_build_editable(config_settings=None):
    with _in_package():
        return mesonpy.get_requires_for_build_editable(config_settings)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    wheel_directory = _absolute(wheel_directory)
    metadata_directory = _absolute(metadata_directory)
    with _in_package():
        return mesonpy.build_editable(wheel_directory, config_settings, metadata_directory)
