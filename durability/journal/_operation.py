"""One declaration per journal operation; both facades derive their method from it.

An operation is a function ``build(journal, <the public arguments>) -> Plan[T]`` that
checks and masks its arguments (no database) and returns the transaction to run
(durability/journal/_plan.py). Decorated with ``@operation`` inside one of the operation
classes (``CallOps`` in _calls.py, ``RunOps`` in _run_ops.py, ...), it becomes a typed
descriptor: read on a ``Journal`` it is ``Callable[P, T]`` (build, then execute in the
caller's thread); read on ``journal.aio`` it is ``Callable[P, Awaitable[T]]`` (build on the
event loop or in the journal's pool, then hand the transaction to the store). The
signature (``P``, a ParamSpec) is the builder's own minus ``journal``, so type checkers see
every method of both facades. Adding an operation is one decorated function.

``prepare`` says where the asynchronous facade builds the plan: ``"loop"`` (cheap: checks
only), ``"pool"`` (always in the journal's pool), or the name of the argument whose size
decides (``_validation.is_light``: short text and few containers are masked and
serialised on the loop, anything larger in the pool).

Operations that differ by one value share one builder (``Builder``), each declared on an
instance of it: ``admit = operation()(_Admit("admit", InputKind.RUN, doc))``.

``@deferrable`` declares a write that may ride on the run's next write
(durability/journal/_deferral.py): its builder returns the plan with ``defer_to`` set to
the run (or None: commit it now); the method returns True when it was deferred.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from types import MethodType
from typing import TYPE_CHECKING, Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from durability.journal._plan import Plan
from durability.journal._validation import is_light
from durability.masking import Masker
from durability.store.base import Store, StoreTx

if TYPE_CHECKING:  # pragma: no cover
    from durability.checkpoints import HistoryCache
    from durability.cluster import Cluster
    from durability.journal._deferral import Deferrals

P = ParamSpec("P")
T = TypeVar("T")
R = TypeVar("R")
V = TypeVar("V")


class JournalBase:
    """What an operation's builder and the asynchronous facade see of a ``Journal``."""

    store: Store
    clock: Callable[[], float]
    history_cache: HistoryCache
    cluster: Cluster | None
    deferrals: Deferrals

    @property
    def masker(self) -> Masker:
        raise NotImplementedError

    def execute(self, plan: Plan[T]) -> T:
        raise NotImplementedError

    def write_op(self, plan: Plan[T]) -> Callable[[StoreTx], T]:
        raise NotImplementedError

    def writes_natively_async(self) -> bool:
        raise NotImplementedError

    def executor(self) -> ThreadPoolExecutor:
        raise NotImplementedError


class AsyncBase:
    """The asynchronous facade's side: how a plan is built and executed from a loop."""

    @property
    def journal(self) -> JournalBase:
        raise NotImplementedError

    async def execute_async(self, plan: Plan[T]) -> T:
        """Run a plan from the event loop: a write on an engine with native asynchronous
        writes goes straight to the store's writer, anything else runs in the pool."""
        journal = self.journal
        if plan.write and journal.writes_natively_async():
            value = await journal.store.write_async(journal.write_op(plan))
            return plan.after(value) if plan.after is not None else value
        if not plan.write:
            await journal.store.flush_async()  # a read sees every write handed over before it
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(journal.executor(), journal.execute, plan)

    async def build_async(self, light: bool, build: Callable[[], Plan[T]]) -> Plan[T]:
        """Build the plan on the loop when that is cheap, else in the journal's pool."""
        if light:
            return build()
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.journal.executor(), build)


class Builder(Generic[V]):
    """One builder for operations that differ by one value (``admit`` and
    ``admit_intervention``, by the kind of input): each operation is declared on an
    instance named and documented as it, whose ``__call__`` builds with ``variant``."""

    def __init__(self, name: str, variant: V, doc: str) -> None:
        self.__name__ = self.__qualname__ = name
        self.__doc__ = doc
        self.variant = variant


def _lightness(
    build: Callable[..., Any], prepare: str
) -> Callable[[tuple[Any, ...], dict[str, Any]], bool]:
    """Whether a call's arguments are cheap to prepare on the loop (see the module doc)."""
    if prepare == "loop":
        return lambda args, kwargs: True
    if prepare == "pool":
        return lambda args, kwargs: False
    params = list(inspect.signature(build).parameters.values())[1:]
    param = next((p for p in params if p.name == prepare), None)
    if param is None:
        raise TypeError(f"{build.__name__} has no argument {prepare!r}")
    index = params.index(param) if param.kind is param.POSITIONAL_OR_KEYWORD else None
    default = None if param.default is param.empty else param.default

    def light(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        if prepare in kwargs:
            return is_light(kwargs[prepare])
        if index is not None and index < len(args):
            return is_light(args[index])
        return is_light(default)

    return light


def _public_signature(build: Callable[..., Any], returns: Any) -> inspect.Signature:
    """The builder's signature as the facades show it: ``journal`` first (bound away like
    ``self``), and the operation's result instead of its plan."""
    return inspect.signature(build).replace(return_annotation=returns)


def _result_annotation(build: Callable[..., Any]) -> Any:
    returns = inspect.signature(build).return_annotation
    if isinstance(returns, str) and returns.startswith("Plan[") and returns.endswith("]"):
        return returns[5:-1]
    return returns


class _Declared(Generic[P, R]):
    """A declared operation: a descriptor giving each facade its method."""

    build: Callable[..., Plan[Any]]

    def __init__(self, build: Callable[..., Plan[Any]], prepare: str, returns: Any) -> None:
        self.build = build
        self.__name__ = build.__name__
        self.__qualname__ = build.__qualname__
        self.__doc__ = build.__doc__
        self.__wrapped__ = build
        self.light = _lightness(build, prepare)
        signature = _public_signature(build, returns)
        self.sync_method = self._sync_method()
        self.async_method = self._async_method()
        for method in (self.sync_method, self.async_method):
            functools.update_wrapper(method, build)
            method.__signature__ = signature  # type: ignore[attr-defined]
            del method.__wrapped__  # type: ignore[attr-defined]

    def _sync_method(self) -> Callable[..., Any]:
        raise NotImplementedError

    def _async_method(self) -> Callable[..., Any]:
        raise NotImplementedError

    @overload
    def __get__(self, obj: None, owner: type) -> _Declared[P, R]: ...

    @overload
    def __get__(self, obj: AsyncBase, owner: type) -> Callable[P, Coroutine[Any, Any, R]]: ...

    @overload
    def __get__(self, obj: JournalBase, owner: type) -> Callable[P, R]: ...

    def __get__(self, obj: Any, owner: type) -> Any:
        if obj is None:
            return self
        if isinstance(obj, AsyncBase):
            return MethodType(self.async_method, obj)
        return MethodType(self.sync_method, obj)


class Operation(_Declared[P, T]):
    """An operation whose method returns the plan's result once it is durable."""

    def __init__(
        self, build: Callable[Concatenate[JournalBase, P], Plan[T]], prepare: str = "loop"
    ) -> None:
        super().__init__(build, prepare, _result_annotation(build))

    def _sync_method(self) -> Callable[..., Any]:
        declared = self

        def sync(journal: JournalBase, /, *args: Any, **kwargs: Any) -> Any:
            return journal.execute(declared.build(journal, *args, **kwargs))

        return sync

    def _async_method(self) -> Callable[..., Any]:
        declared = self

        async def aio(facade: AsyncBase, /, *args: Any, **kwargs: Any) -> Any:
            build = functools.partial(declared.build, facade.journal, *args, **kwargs)
            plan = await facade.build_async(declared.light(args, kwargs), build)
            return await facade.execute_async(plan)

        return aio


class Deferrable(_Declared[P, bool]):
    """A write that may ride on the run's next write: True when it was deferred."""

    def __init__(
        self, build: Callable[Concatenate[JournalBase, P], Plan[Any]], prepare: str = "loop"
    ) -> None:
        super().__init__(build, prepare, "bool")

    def _sync_method(self) -> Callable[..., Any]:
        declared = self

        def sync(journal: JournalBase, /, *args: Any, **kwargs: Any) -> bool:
            plan = declared.build(journal, *args, **kwargs)
            if plan.defer_to is None:
                journal.execute(plan)
                return False
            journal.deferrals.defer(plan, plan.defer_to)
            return True

        return sync

    def _async_method(self) -> Callable[..., Any]:
        declared = self

        async def aio(facade: AsyncBase, /, *args: Any, **kwargs: Any) -> bool:
            journal = facade.journal
            build = functools.partial(declared.build, journal, *args, **kwargs)
            plan = await facade.build_async(declared.light(args, kwargs), build)
            if plan.defer_to is None:
                await facade.execute_async(plan)
                return False
            journal.deferrals.defer(plan, plan.defer_to)
            return True

        return aio


def operation(
    prepare: str = "loop",
) -> Callable[[Callable[Concatenate[JournalBase, P], Plan[T]]], Operation[P, T]]:
    """Declare a journal operation (see the module doc)."""

    def declare(build: Callable[Concatenate[JournalBase, P], Plan[T]]) -> Operation[P, T]:
        return Operation(build, prepare)

    return declare


def deferrable(
    prepare: str = "loop",
) -> Callable[[Callable[Concatenate[JournalBase, P], Plan[Any]]], Deferrable[P]]:
    """Declare a write that may be deferred (see the module doc)."""

    def declare(build: Callable[Concatenate[JournalBase, P], Plan[Any]]) -> Deferrable[P]:
        return Deferrable(build, prepare)

    return declare
