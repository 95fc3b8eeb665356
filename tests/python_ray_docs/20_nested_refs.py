# After Ray's "Objects" page, https://docs.ray.io/en/latest/ray-core/objects.html (doc_code/obj_ref.py), and tasks/nested-tasks.html.
import prism as ray


@ray.remote
def echo(a: int, b: int, c: int):
    """This function prints its input values to stdout."""
    print(a, b, c)
    return a, b, c


# Passing the literal values (1, 2, 3) to `echo`.
assert ray.get(echo.remote(1, 2, 3)) == (1, 2, 3)

# Put the values (1, 2, 3) into Ray's object store.
a, b, c = ray.put(1), ray.put(2), ray.put(3)

# Passing an object as a top-level argument to `echo`. Ray will de-reference top-level
# arguments, so `echo` will see the literal values (1, 2, 3) in this case as well.
assert ray.get(echo.remote(a, b, c)) == (1, 2, 3)


@ray.remote
def echo_and_get(x_list):  # List[ObjectRef]
    """This function prints its input values to stdout."""
    print("args:", x_list)
    print("values:", ray.get(x_list))
    return [type(x).__name__ for x in x_list], ray.get(x_list)


# Passing an object as a nested argument to `echo_and_get`. Ray does not
# de-reference nested args, so `echo_and_get` sees the references.
types, values = ray.get(echo_and_get.remote([a, b, c]))
assert types == ["ObjectRef"] * 3, types
assert values == [1, 2, 3]


@ray.remote
def f():
    return 1


@ray.remote
def g():
    # Call f 4 times and return the resulting object refs.
    return [f.remote() for _ in range(4)]


@ray.remote
def h():
    # Call f 4 times, block until those 4 tasks finish,
    # retrieve the results, and return the values.
    return ray.get([f.remote() for _ in range(4)])


refs = ray.get(g.remote())
assert len(refs) == 4 and all(isinstance(r, ray.ObjectRef) for r in refs)
assert ray.get(refs) == [1, 1, 1, 1]
assert ray.get(h.remote()) == [1, 1, 1, 1]

# An object that holds refs, put in the store and read back: the refs inside stay refs.
nested = ray.put({"inner": [a, b], "more": ray.put("x")})
value = ray.get(nested)
assert ray.get(value["inner"]) == [1, 2] and ray.get(value["more"]) == "x"

print("OK nested_refs")
