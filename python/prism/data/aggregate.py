"""Aggregations for GroupedData.aggregate (Ray's ray.data.aggregate): computed by the C++
engine. Output columns are named as Ray names them ("count()", "sum(x)", "mean(x)", ...),
or alias_name."""


class AggregateFn:
    """One aggregation: kind ("count", "sum", "min", "max", "mean", "std") over column `on`."""

    def __init__(self, kind, on=None, ddof=1, alias_name=None):
        if kind != "count" and not on:
            raise ValueError(f"prism.data.aggregate: {kind} needs a column (on=)")
        self.kind = kind
        self.on = on
        self.ddof = int(ddof)
        self.name = alias_name or self._default_name()

    def _default_name(self):
        return "count()" if self.kind == "count" else f"{self.kind}({self.on})"

    def __repr__(self):
        return f"{type(self).__name__}({self.on or ''})"


class Count(AggregateFn):
    def __init__(self, alias_name=None):
        super().__init__("count", None, alias_name=alias_name)


class Sum(AggregateFn):
    def __init__(self, on, ignore_nulls=True, alias_name=None):
        super().__init__("sum", on, alias_name=alias_name)


class Min(AggregateFn):
    def __init__(self, on, ignore_nulls=True, alias_name=None):
        super().__init__("min", on, alias_name=alias_name)


class Max(AggregateFn):
    def __init__(self, on, ignore_nulls=True, alias_name=None):
        super().__init__("max", on, alias_name=alias_name)


class Mean(AggregateFn):
    def __init__(self, on, ignore_nulls=True, alias_name=None):
        super().__init__("mean", on, alias_name=alias_name)


class Std(AggregateFn):
    def __init__(self, on, ddof=1, ignore_nulls=True, alias_name=None):
        super().__init__("std", on, ddof=ddof, alias_name=alias_name)


__all__ = ["AggregateFn", "Count", "Sum", "Min", "Max", "Mean", "Std"]
