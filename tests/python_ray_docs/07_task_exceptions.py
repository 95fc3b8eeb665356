# After Ray's "Task Fault Tolerance" page, https://docs.ray.io/en/latest/ray-core/fault_tolerance/tasks.html (doc_code/task_exceptions.py).
import prism as ray


@ray.remote
def f():
    raise Exception("the real error")


@ray.remote
def g(x):
    return


caught = []
try:
    ray.get(f.remote())
except ray.exceptions.RayTaskError as e:
    print(e)
    # ray::f() (pid=71867, ip=XXX.XX.XXX.XX)
    #   File "errors.py", line 5, in f
    #     raise Exception("the real error")
    # Exception: the real error
    assert "the real error" in str(e)
    caught.append("f")

try:
    ray.get(g.remote(f.remote()))
except ray.exceptions.RayTaskError as e:
    print(e)
    # ray::g() (pid=73085, ip=128.32.132.47)
    #   At least one of the input arguments for this task could not be computed:
    # ray.exceptions.RayTaskError: ray::f() (pid=73085, ip=XXX.XX.XXX.XX)
    #   File "errors.py", line 5, in f
    #     raise Exception("the real error")
    # Exception: the real error
    assert "the real error" in str(e)
    caught.append("g")


class MyException(Exception):
    ...


@ray.remote
def raises_my_exc():
    raise MyException("a user exception")


try:
    ray.get(raises_my_exc.remote())
except MyException as e:
    print(e)
    # ray::raises_my_exc() (pid=15329, ip=127.0.0.1)
    #   File "<$PWD>/task_exceptions.py", line 45, in raises_my_exc
    #     raise MyException("a user exception")
    # MyException: a user exception
    assert "a user exception" in str(e)
    assert isinstance(e, ray.exceptions.RayTaskError)
    caught.append("raises_my_exc")


class MyFinalException(Exception):
    def __init_subclass__(cls, /, *args, **kwargs):
        raise TypeError("Cannot subclass this little exception class.")


@ray.remote
def raises_my_final_exc():
    raise MyFinalException("a *final* user exception")


try:
    ray.get(raises_my_final_exc.remote())
except ray.exceptions.RayTaskError as e:
    assert isinstance(e.cause, MyFinalException)
    print(e)
    # ray::raises_my_final_exc() (pid=88226, ip=127.0.0.1)
    # File "<$PWD>/task_exceptions.py", line 66, in raises_my_final_exc
    #     raise MyFinalException("a *final* user exception")
    # MyFinalException: a *final* user exception
    print(type(e.cause))
    # <class '__main__.MyFinalException'>
    print(e.cause)
    # a *final* user exception
    assert str(e.cause) == "a *final* user exception"
    assert not isinstance(e, MyFinalException)
    caught.append("raises_my_final_exc")

assert caught == ["f", "g", "raises_my_exc", "raises_my_final_exc"], caught

print("OK task_exceptions")
