"""Reading one HTTP answer off a raw socket, for tests that send bytes no client library would."""
import socket


def read_answer(s):
    """(status, reason, headers, body) of the next answer on `s`, or None if it closed without one.

    Headers are keyed in lower case. Reads up to Content-Length, or to the close when there is none.
    """
    buf = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
            head, sep, body = buf.partition(b"\r\n\r\n")
            if sep:
                headers = {k.lower(): v for k, v in (l.split(": ", 1) for l in head.decode().split("\r\n")[1:] if ": " in l)}
                n = int(headers.get("content-length", "-1"))
                if n >= 0 and len(body) >= n:
                    break
    except (ConnectionResetError, socket.timeout):
        pass
    if not buf:
        return None
    head, _, body = buf.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = {k.lower(): v for k, v in (l.split(": ", 1) for l in lines[1:] if ": " in l)}
    _, status, reason = (lines[0].split(" ", 2) + [""])[:3]
    return int(status), reason, headers, body
