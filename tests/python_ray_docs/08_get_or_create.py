# After Ray's "Named Actors" page, https://docs.ray.io/en/latest/ray-core/actors/named-actors.html (doc_code/get_or_create.py).
import prism as ray


@ray.remote
class Greeter:
    def __init__(self, value):
        self.value = value

    def say_hello(self):
        return self.value


# Actor `g1` doesn't yet exist, so it is created with the given args.
a = Greeter.options(name="g1", get_if_exists=True).remote("Old Greeting")
assert ray.get(a.say_hello.remote()) == "Old Greeting"

# Actor `g1` already exists, so it is returned (new args are ignored).
b = Greeter.options(name="g1", get_if_exists=True).remote("New Greeting")
assert ray.get(b.say_hello.remote()) == "Old Greeting"


@ray.remote
class Counter:
    def __init__(self):
        self.count = 0

    def increment(self):
        self.count += 1
        return self.count


# Create an actor with a name
counter = Counter.options(name="some_name").remote()
assert ray.get(counter.increment.remote()) == 1

# Retrieve the actor later somewhere
counter = ray.get_actor("some_name")
assert ray.get(counter.increment.remote()) == 2

# A name no actor has.
try:
    ray.get_actor("no_such_name")
except ValueError:
    pass
else:
    raise AssertionError("get_actor found an actor that was never created")

print("OK get_or_create")
