"""Strategic merge patch, as kube-apiserver applies one to a built-in object: a port of
apimachinery's ``strategicpatch.StrategicMergeMapPatch`` driven by the kind's patch
strategies and merge keys (:mod:`._typetree`, from the OpenAPI spec).

Private to :mod:`kubereflector.testing.apiserver`. :func:`strategic_merge_patch` leaves
its inputs untouched and returns a new document; it raises
:class:`~._patch.PatchFailed` for a patch kube refuses.

What it does, as kube does: maps merge key by key (``null`` deletes); a list whose
field has ``patchStrategy: merge`` merges by its ``patchMergeKey`` (lists of objects)
or as a set (lists of scalars), other lists are replaced; directives: ``$patch:
replace`` and ``$patch: delete`` in a map or a list item, ``$retainKeys``,
``$setElementOrder/<field>``, ``$deleteFromPrimitiveList/<field>``; the merged order
of a list follows kube's (patch items in the patch's order, the server's other items
where they were).
"""

from __future__ import annotations

import copy
from typing import Any, Final

from ._patch import PatchFailed
from ._typetree import TypeNode

__all__ = ["strategic_merge_patch"]

_DIRECTIVE: Final = "$patch"
_RETAIN_KEYS: Final = "$retainKeys"
_SET_ORDER: Final = "$setElementOrder/"
_DELETE_FROM: Final = "$deleteFromPrimitiveList/"


def strategic_merge_patch(target: Any, patch: Any, root: TypeNode) -> Any:
    """``patch`` applied to ``target`` (a built-in object whose kind's tree starts at
    ``root``)."""
    if not isinstance(patch, dict):
        raise PatchFailed("a strategic merge patch is a JSON object")
    original = copy.deepcopy(target) if isinstance(target, dict) else {}
    return _merge_map(original, copy.deepcopy(patch), root)


def _strategy(node: TypeNode) -> str:
    """The field's patch strategy without ``retainKeys`` (kube's
    ``extractRetainKeysPatchStrategy``)."""
    strategies = [s for s in node.patch_strategy.split(",") if s]
    if len(strategies) > 2:
        raise PatchFailed(f"unexpected patch strategy: {node.patch_strategy}")
    rest = [s for s in strategies if s != "retainKeys"]
    return rest[0] if rest else ""


def _merge_map(original: dict[str, Any], patch: dict[str, Any], node: TypeNode) -> dict[str, Any]:
    if _DIRECTIVE in patch:
        directive = patch[_DIRECTIVE]
        if directive == "replace":
            del patch[_DIRECTIVE]
            return patch
        if directive == "delete":
            return {}
        raise PatchFailed(f"Unknown patch type: {directive} in map: {patch}")
    _retain_keys(original, patch)
    _set_element_orders(original, patch, node)
    for key, value in list(patch.items()):
        delete_list = key.startswith(_DELETE_FROM)
        if delete_list:
            key = key[len(_DELETE_FROM) :]
            if not key:
                raise PatchFailed("Unable to find key in $deleteFromPrimitiveList")
        if value is None:
            original.pop(key, None)
            continue
        if key not in original or type(original[key]) is not type(value):
            if not delete_list:
                _discard_nulls(value)
                kept, keep = _remove_directives(value)
                if keep:
                    original[key] = kept
                else:
                    original.pop(key, None)
            continue
        child = node.field(key)
        if isinstance(value, dict):
            if _strategy(child) == "replace":
                original[key] = value
            else:
                original[key] = _merge_map(original[key], value, child)
        elif isinstance(value, list):
            original[key] = _merge_slice_handler(original[key], value, child, delete_list)
        else:
            kept, keep = _remove_directives(value)
            if keep:
                original[key] = kept
            else:
                original.pop(key, None)
    return original


def _retain_keys(original: dict[str, Any], patch: dict[str, Any]) -> None:
    if _RETAIN_KEYS not in patch:
        return
    retained = patch.pop(_RETAIN_KEYS)
    if not isinstance(retained, list):
        raise PatchFailed("invalid patch format of retainKeys")
    keep = {key for key in retained if isinstance(key, str)}
    for key, value in patch.items():
        if value is None or key.startswith((_DELETE_FROM, _SET_ORDER)):
            continue
        if key not in keep:
            raise PatchFailed("invalid patch format of retainKeys")
    for key in list(original):
        if key not in keep:
            del original[key]


def _set_element_orders(original: dict[str, Any], patch: dict[str, Any], node: TypeNode) -> None:
    """kube's ``mergePatchIntoOriginal``: the lists a ``$setElementOrder`` names."""
    for key in [k for k in patch if k.startswith(_SET_ORDER)]:
        order = patch.pop(key)
        if not isinstance(order, list):
            raise PatchFailed("invalid patch format of setElementOrder list")
        field_name = key[len(_SET_ORDER) :]
        if not field_name:
            raise PatchFailed("invalid patch format of setElementOrder list")
        child = node.field(field_name)
        merge_key = child.merge_key
        found_original, found_patch = field_name in original, field_name in patch
        original_list = original.get(field_name) if found_original else []
        patch_list = patch.get(field_name) if found_patch else []
        if not isinstance(original_list, list) or not isinstance(patch_list, list):
            raise PatchFailed(f"expected a list at {field_name}")
        if found_original and not found_patch:
            merged = original_list
        elif found_patch and not found_original:
            value, keep = _remove_directives(patch_list)
            if not keep:
                continue
            merged = value
        elif found_original and found_patch:
            merged = _merge_slice_handler(original_list, patch_list, child, False)
        else:
            continue
        if merge_key:
            in_order, server_only = _partition_maps(merged, order, merge_key)
        else:
            in_order, server_only = _partition_scalars(merged, order)
        kind_is_map = _element_kind(original_list, patch_list) is dict
        original[field_name] = _normalize_order(
            in_order, server_only, order, original_list, merge_key, kind_is_map
        )
        patch.pop(field_name, None)


def _merge_slice_handler(
    original: list[Any], patch: list[Any], node: TypeNode, delete_list: bool
) -> list[Any]:
    if _strategy(node) == "merge" or delete_list:
        return _merge_slice(original, patch, node, delete_list)
    return patch


def _merge_slice(
    original: list[Any], patch: list[Any], node: TypeNode, delete_list: bool
) -> list[Any]:
    if not original and not patch:
        return original
    element = _element_kind(original, patch)
    merge_key = node.merge_key
    if element is not dict:
        if delete_list:
            doomed = [_hashable(v) for v in patch]
            return [v for v in original if _hashable(v) not in doomed]
        merged = _deduplicate([*original, *patch])
        in_patch, server_only = _partition_scalars(merged, patch)
        return _normalize_order(in_patch, server_only, patch, original, "", False)
    if not merge_key:
        raise PatchFailed("cannot merge lists without merge key")
    original, patch = _special_elements(list(original), patch, merge_key)
    item = node.item()
    merged = list(original)  # the server's order stays the list before the new items
    for value in patch:
        if merge_key not in value:
            raise PatchFailed(f"map: {value} does not contain declared merge key: {merge_key}")
        index = _find(merged, merge_key, value[merge_key])
        if index is None:
            merged.append(value)
        else:
            merged[index] = original[index] = _merge_map(merged[index], value, item)
    in_patch, server_only = _partition_maps(merged, patch, merge_key)
    return _normalize_order(in_patch, server_only, patch, original, merge_key, True)


def _special_elements(
    original: list[Any], patch: list[Any], merge_key: str
) -> tuple[list[Any], list[Any]]:
    """kube's ``mergeSliceWithSpecialElements``: ``$patch: delete`` items remove theirs,
    a ``$patch: replace`` item replaces the list."""
    rest: list[Any] = []
    replace = False
    for value in patch:
        if not isinstance(value, dict):
            raise PatchFailed("list element types are not identical")
        if _DIRECTIVE not in value:
            rest.append(value)
            continue
        directive = value[_DIRECTIVE]
        if directive == "delete":
            if merge_key not in value:
                raise PatchFailed(f"map: {value} does not contain declared merge key: {merge_key}")
            while (index := _find(original, merge_key, value[merge_key])) is not None:
                del original[index]
        elif directive == "replace":
            replace = True
        elif directive == "merge":
            raise PatchFailed("merging lists cannot yet be specified in the patch")
        else:
            raise PatchFailed(f"Unknown patch type: {directive} in map: {value}")
    if replace:
        return rest, []
    return original, rest


def _find(items: list[Any], key: str, value: Any) -> int | None:
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise PatchFailed(f"value for key {index} is not a map")
        if key in item and _same(item[key], value):
            return index
    return None


def _same(a: Any, b: Any) -> bool:
    """Go's ``==`` on decoded JSON scalars (a bool is not a number)."""
    return (type(a) is type(b) and bool(a == b)) or (_number(a) and _number(b) and a == b)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _hashable(value: Any) -> Any:
    return (type(value).__name__ if not _number(value) else "number", value)


def _deduplicate(items: list[Any]) -> list[Any]:
    """kube's ``deduplicateScalars``, order quirks and all (a duplicate is replaced by
    the last item)."""
    items = list(items)
    length = len(items) - 1
    i = 0
    while i < length:
        j = i + 1
        while j <= length:
            if _same(items[i], items[j]):
                items[j] = items[length]
                items = items[:length]
                length -= 1
                j -= 1
            j += 1
        i += 1
    return items


def _partition_scalars(items: list[Any], by: list[Any]) -> tuple[list[Any], list[Any]]:
    wanted = {_hashable(v) for v in by if not isinstance(v, (dict, list))}
    in_by = [v for v in items if _hashable(v) in wanted]
    rest = [v for v in items if _hashable(v) not in wanted]
    return in_by, rest


def _partition_maps(items: list[Any], by: list[Any], key: str) -> tuple[list[Any], list[Any]]:
    in_by: list[Any] = []
    rest: list[Any] = []
    for value in items:
        if not isinstance(value, dict) or key not in value:
            raise PatchFailed(f"map: {value} does not contain declared merge key: {key}")
        (in_by if _find(by, key, value[key]) is not None else rest).append(value)
    return in_by, rest


def _index(items: list[Any], value: Any, key: str, maps: bool) -> int:
    def get(item: Any) -> Any:
        return item.get(key) if maps and isinstance(item, dict) else item

    wanted = get(value)
    for index, item in enumerate(items):
        if not isinstance(get(item), (dict, list)) and _same(get(item), wanted):
            return index
    return -1


def _normalize_order(
    patch_items: list[Any],
    server_only: list[Any],
    patch_order: list[Any],
    server_order: list[Any],
    key: str,
    maps: bool,
) -> list[Any]:
    """kube's ``normalizeElementOrder``: patch items in the patch's order, server-only
    items in the server's, merged by the server's order."""
    patch_items = _sort_by(patch_items, patch_order, key, maps)
    server_only = _sort_by(server_only, server_order, key, maps)
    merged: list[Any] = []
    i = j = 0
    while i < len(server_only) or j < len(patch_items):
        if i >= len(server_only):
            merged.append(patch_items[j])
            j += 1
        elif j >= len(patch_items):
            merged.append(server_only[i])
            i += 1
        else:
            left = _index(server_order, server_only[i], key, maps)
            right = _index(server_order, patch_items[j], key, maps)
            if left >= 0 and right >= 0 and left < right:
                merged.append(server_only[i])
                i += 1
            else:
                merged.append(patch_items[j])
                j += 1
    return merged


def _sort_by(items: list[Any], order: list[Any], key: str, maps: bool) -> list[Any]:
    """kube's ``normalizeSliceOrder`` (a stable sort by position in ``order``; items
    ``$patch: delete`` last)."""
    doomed: list[Any] = []
    if maps:
        doomed = [v for v in items if isinstance(v, dict) and v.get(_DIRECTIVE) == "delete"]
        items = [v for v in items if not (isinstance(v, dict) and v.get(_DIRECTIVE) == "delete")]

    def less(a: Any, b: Any) -> bool:
        ia = _index(order, a, key, maps)
        if ia >= 0:
            ib = _index(order, b, key, maps)
            if ib >= 0:
                return ia < ib
        return True

    def compare(a: Any, b: Any) -> int:
        # sort.SliceStable with kube's less (not a strict order when an item is missing
        # from ``order``): mirror an insertion sort, which is what SliceStable runs on
        # short lists.
        return -1 if less(a, b) else 1

    result = list(items)
    for index in range(1, len(result)):
        current = result[index]
        position = index
        while position > 0 and compare(current, result[position - 1]) < 0:
            result[position] = result[position - 1]
            position -= 1
        result[position] = current
    return [*result, *doomed]


def _element_kind(*lists: list[Any]) -> type | None:
    found: type | None = None
    for items in lists:
        for value in items:
            kind = dict if isinstance(value, dict) else type(value)
            if kind is list:
                raise PatchFailed("lists of lists are not supported")
            if found is None:
                found = kind
            elif found is not kind and not (_number(value) and found in (int, float)):
                raise PatchFailed("list element types are not identical")
    return found


def _discard_nulls(value: Any) -> None:
    if isinstance(value, dict):
        for key in [k for k, v in value.items() if v is None]:
            del value[key]
        for child in value.values():
            _discard_nulls(child)
    elif isinstance(value, list):
        for child in value:
            _discard_nulls(child)


def _remove_directives(value: Any) -> tuple[Any, bool]:
    if isinstance(value, dict):
        if _DIRECTIVE in value:
            return None, False
        out = {}
        for key, child in value.items():
            kept, keep = _remove_directives(child)
            if keep:
                out[key] = kept
        return out, True
    if isinstance(value, list):
        return [kept for kept, keep in map(_remove_directives, value) if keep], True
    return value, True
