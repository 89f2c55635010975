#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A hostile etcd: tern's etcd world against a fake gateway that answers
each request of one kind wrongly (garbage, too long, cut short, missing
or malformed fields, bad base64, a value too large, an HTTP error).
Every case must end with `tern bench --world` refusing cleanly: exit 1
and a log line naming what was wrong, never a crash or a hang.

usage: world_etcd_hostile.py TERN
"""
import base64
import os
import http.server
import json
import socket
import subprocess
import sys
import threading

TERN = sys.argv[1]
mode = {'name': ''}


def b64(s):
    return base64.b64encode(s if isinstance(s, bytes) else s.encode()).decode()


class Fake(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'

    def log_message(self, *a):
        pass

    def reply(self, body, code=200, length=None):
        if isinstance(body, str):
            body = body.encode()
        self.send_response(code)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length',
                         str(len(body) if length is None else length))
        self.end_headers()
        try:
            self.wfile.write(body)
        except OSError:
            pass

    def do_POST(self):
        n = int(self.headers.get('Content-Length', '0'))
        req = json.loads(self.rfile.read(n) or b'{}')
        m = mode['name']
        path = self.path
        if path == '/v3/lease/grant':
            if m == 'garbage':
                return self.reply('<html>not json</html>')
            if m == 'huge':
                return self.reply('{"x":"' + 'a' * (8 << 20) + '"}')
            if m == 'cut':
                return self.reply('{"ID":"12', length=100)
            if m == 'no-id':
                return self.reply('{"TTL":"10"}')
            if m == 'bad-id':
                return self.reply('{"ID":"12x\\"; DROP","TTL":"10"}')
            if m == 'http-500':
                return self.reply('{"error":"etcdserver: too many requests"}',
                                  code=500)
            if m == 'deep':
                return self.reply('[' * 200000 + ']' * 200000)
            return self.reply('{"ID":"7587","TTL":"10"}')
        if path == '/v3/kv/range':
            key = base64.b64decode(req.get('key', ''))
            if key.endswith(b'/r1/card'):
                if m == 'bad-b64':
                    return self.reply('{"kvs":[{"key":"%s","value":"!!!!"}]}'
                                      % b64(key))
                if m == 'too-large':
                    return self.reply('{"kvs":[{"key":"%s","value":"%s"}]}'
                                      % (b64(key), b64(b'x' * 9000)))
                if m == 'no-value':
                    return self.reply('{"kvs":[{"key":"%s"}]}' % b64(key))
                if m == 'not-a-card':
                    return self.reply('{"kvs":[{"key":"%s","value":"%s"}]}'
                                      % (b64(key), b64(b'TERNC garbage')))
            return self.reply('{"header":{"revision":"1"}}')
        return self.reply('{"header":{"revision":"1"}}')


srv = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Fake)
port = srv.server_address[1]
threading.Thread(target=srv.serve_forever, daemon=True).start()

cases = {
    # mode: what the log must name
    'garbage': 'not a JSON object',
    'huge': 'more than',
    'cut': 'etcd',
    'no-id': 'no ID',
    'bad-id': 'no ID',
    'http-500': 'HTTP 500',
    'deep': 'not a JSON object',
    'bad-b64': 'not a value tern wrote',
    'too-large': 'not a value tern wrote',
    'no-value': 'not a value tern wrote',
    'not-a-card': "rank 1's card",
}
fail = 0
for m, want in cases.items():
    mode['name'] = m
    env = {'TERN_WORLD_RANK': '0', 'TERN_WORLD_SIZE': '2', 'PATH': '/usr/bin:/bin'}
    try:
        p = subprocess.run([TERN, 'bench', '--world',
                            'etcd://127.0.0.1:%d/job' % port,
                            '--provider', 'tcp', '--node', '127.0.0.1'],
                           env=env, capture_output=True, text=True,
                           timeout=90)
    except subprocess.TimeoutExpired:
        print('not ok - %s: tern hung' % m)
        fail = 1
        continue
    out = p.stdout + p.stderr
    if 'no etcd backend' in out:
        print('SKIP: this tern was built without libcurl\'s header')
        sys.exit(1 if os.environ.get('TERN_ETCD_REQUIRED') == '1' else 77)
    last = [l for l in out.splitlines() if l.strip()][-2:]
    if p.returncode != 1:
        print('not ok - %s: exit %d (a crash is negative)' % (m, p.returncode))
        print(out[-2000:])
        fail = 1
    elif want not in out:
        print('not ok - %s: the log does not say "%s":' % (m, want))
        print(out[-2000:])
        fail = 1
    else:
        print('ok - %s: refused: %s' % (m, ' | '.join(last)))
srv.shutdown()
sys.exit(fail)
