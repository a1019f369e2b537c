"""The events of the trace TensorFlow's profiler session returns
(_pywrap_profiler.ProfilerSession.stop(): a serialized tsl Trace,
tsl/profiler/protobuf/trace_events.proto), read straight from the protobuf wire format.

TensorFlow ships no Python class for that message, and the protobuf runtime refuses some of its
strings (not valid UTF-8): this reader decodes strings with replacement and reads only what the
per-kernel times need: Trace.events (4) -> TraceEvent{resource_id 2 (the thread), name 3,
timestamp_ps 9, duration_ps 10, args 11 (map<string, string>)}.
"""


def _fields(buf):
    """(field number, wire type, value) of one message: ints for varints and fixed, bytes for
    length-delimited fields."""
    i, n = 0, len(buf)
    while i < n:
        key, i = _varint(buf, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire == 1:
            value, i = buf[i : i + 8], i + 8
        elif wire == 2:
            size, i = _varint(buf, i)
            value, i = buf[i : i + size], i + size
        elif wire == 5:
            value, i = buf[i : i + 4], i + 4
        else:
            raise ValueError(f"xspace: unsupported wire type {wire}")
        yield field, wire, value


def _varint(buf, i):
    shift = result = 0
    while True:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, i
        shift += 7


def _signed(v):
    return v - (1 << 64) if v >= 1 << 63 else v


class Event:
    __slots__ = ("name", "start_ns", "duration_ns", "args", "resource")

    def __init__(self, name, start_ns, duration_ns, args, resource):
        self.name, self.start_ns, self.duration_ns, self.args, self.resource = (
            name,
            start_ns,
            duration_ns,
            args,
            resource,
        )


def _text(v):
    return bytes(v).decode("utf-8", "replace")


def events(serialized):
    """Every event of a serialized Trace: Event(name, start_ns, duration_ns, args {name: value},
    resource (the thread's id)), in no particular order."""
    out = []
    for f, _, ev in _fields(memoryview(serialized)):
        if f != 4:
            continue
        name, resource, ts_ps, dur_ps, args = "", 0, 0, 0, {}
        for g, _, v in _fields(ev):
            if g == 3:
                name = _text(v)
            elif g == 2:
                resource = v
            elif g == 9:
                ts_ps = v
            elif g == 10:
                dur_ps = v
            elif g == 11:
                key = value = ""
                for h, _, w in _fields(v):
                    if h == 1:
                        key = _text(w)
                    elif h == 2:
                        value = _text(w)
                args[key] = value
        out.append(Event(name, ts_ps / 1000, dur_ps / 1000, args, resource))
    return out
