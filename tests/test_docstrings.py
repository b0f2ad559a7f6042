"""The public API's docstrings pass numpydoc's validation (a chosen set of checks).

Checked: every public function, class and public method has a docstring (GL08; an override
inherits its base class's), a one-line summary that starts with a capital and ends with a period
(SS01-SS03), and a Parameters section that names real parameters in signature order (PR02, PR03)
and starts their descriptions with a capital (PR08).
"""

from __future__ import annotations

import importlib
import inspect

import pytest

numpydoc_validate = pytest.importorskip("numpydoc.validate")

PUBLIC_MODULES = ("gtvcvx", "gtvcvx.graphs", "gtvcvx.losses", "gtvcvx.penalties", "gtvcvx.clustering",
                  "gtvcvx.rkhs", "gtvcvx.reference", "gtvcvx.testing", "gtvcvx.recovery", "gtvcvx.baselines",
                  "gtvcvx.results", "gtvcvx.fl")
CHECKS = {"GL08", "SS01", "SS02", "SS03", "PR02", "PR03", "PR08"}


def _inherits_doc(cls, name) -> bool:
    return any(getattr(base.__dict__.get(name), "__doc__", None) for base in cls.__mro__[1:])


def public_objects() -> list[str]:
    names = set()
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            if not (inspect.isclass(obj) or inspect.isfunction(obj)) or not obj.__module__.startswith("gtvcvx"):
                continue
            qualified = f"{obj.__module__}.{obj.__qualname__}"
            names.add(qualified)
            if inspect.isclass(obj):
                for attr, value in vars(obj).items():
                    if attr.startswith("_") or not inspect.isfunction(value):
                        continue
                    if value.__doc__ is None and _inherits_doc(obj, attr):
                        continue
                    names.add(f"{qualified}.{attr}")
    return sorted(names)


@pytest.mark.parametrize("name", public_objects())
def test_public_docstring_is_valid_numpydoc(name):
    errors = [f"{code}: {message}" for code, message in numpydoc_validate.validate(name)["errors"] if code in CHECKS]
    assert not errors, f"{name}:\n" + "\n".join(errors)
