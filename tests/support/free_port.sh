# Sourced by test and bench scripts: free_port prints a TCP port free on
# 127.0.0.1 now (the kernel's pick), for servers that must be told a port.
free_port() {
  /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
