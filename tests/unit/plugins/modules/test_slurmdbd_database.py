# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""slurmdbd_database against a fake MariaDB client that keeps the server's state: only what differs
is done, the password reaches the client on stdin (escaped) and never its argv or the result, check
mode runs nothing but the read, bad names and a client that prints something else are refused with
the variable to fix. (molecule/slurm, slurm_cluster and site run it against the distributions' real
MariaDB.)"""

from __future__ import annotations

import re

import pytest
from ansible_collections.gpuops.cluster.plugins.modules import slurmdbd_database as mod
from hypothesis import given
from hypothesis import strategies as st
from module_harness import Node, run_module

CLIENT = "/usr/bin/mariadb"
ARGV = [CLIENT, "--protocol=socket", "--socket=/run/mysqld/mysqld.sock", "--batch", "--skip-column-names"]
ARGS = {"name": "slurm_acct_db", "user": "slurm", "password": "it's a \\secret"}
LITERAL = "'it\\'s a \\\\secret'"


class Server(Node):
    """A MariaDB that answers the module's read from its state and applies its statements."""

    def __init__(self, monkeypatch, *, database=False, user=False, password=None, grants=False, reply=None):
        super().__init__(monkeypatch, {"mariadb": CLIENT}, {})
        self.reply = reply
        self.state = {"database": database, "user": user, "password": password, "grants": grants}
        self.inputs = []

    def run_command(self, argv, data=None, **kwargs):
        assert kwargs.get("environ_update", {}).get("LC_ALL") == "C"
        assert list(argv) == ARGV and data is not None
        self.calls.append(list(argv))
        self.inputs.append(data)
        if self.reply:
            return self.reply
        if data.startswith("SELECT 'database'"):
            given_password = re.search(r"PASSWORD\(('(?:[^'\\]|\\.)*')\)", data).group(1)
            s = self.state
            rows = {
                "database": s["database"],
                "user": s["user"],
                "password": s["user"] and s["password"] == given_password,
                "grants": s["grants"],
            }
            return 0, "".join(f"{k}\t{int(v)}\n" for k, v in rows.items()), ""
        for statement in filter(None, data.split(";\n")):
            if statement.startswith("CREATE DATABASE IF NOT EXISTS `slurm_acct_db`"):
                self.state["database"] = True
            elif statement.startswith(("CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY ", "ALTER USER")):
                self.state["user"] = True
                self.state["password"] = statement.rsplit(" IDENTIFIED BY ", 1)[1]
            elif statement == "GRANT ALL PRIVILEGES ON `slurm_acct_db`.* TO 'slurm'@'localhost'":
                assert self.state["database"] and self.state["user"]
                self.state["grants"] = True
            else:
                raise AssertionError(f"unexpected statement {statement!r}")
        return 0, "", ""


def test_a_fresh_server_gets_all_three_then_nothing(monkeypatch):
    server = Server(monkeypatch)
    done = run_module(mod.main, ARGS)
    assert not done.failed and done.result["changed"] is True
    assert done.result["actions"] == [
        "create database slurm_acct_db",
        "create user slurm@localhost",
        "grant all on slurm_acct_db to slurm@localhost",
    ]
    assert server.state == {"database": True, "user": True, "password": LITERAL, "grants": True}
    assert "secret" not in repr(done.result) and all("secret" not in " ".join(c) for c in server.calls)
    again = run_module(mod.main, ARGS)
    assert again.result == {"changed": False, "actions": []}
    assert len(server.inputs) == 3  # read, change, read


def test_another_password_is_set_and_nothing_else(monkeypatch):
    server = Server(monkeypatch, database=True, user=True, password="'old'", grants=True)
    done = run_module(mod.main, ARGS)
    assert done.result["actions"] == ["set the password of slurm@localhost"]
    assert server.state["password"] == LITERAL


def test_lost_grants_come_back(monkeypatch):
    server = Server(monkeypatch, database=True, user=True, password=LITERAL, grants=False)
    assert run_module(mod.main, ARGS).result["actions"] == ["grant all on slurm_acct_db to slurm@localhost"]
    assert server.state["grants"]


def test_check_mode_only_reads(monkeypatch):
    server = Server(monkeypatch)
    done = run_module(mod.main, ARGS, check_mode=True)
    assert done.result["changed"] is True and len(done.result["actions"]) == 3
    assert len(server.inputs) == 1 and server.state["database"] is False


@pytest.mark.parametrize(
    ("args", "variable"),
    [
        ({"name": "slurm-acct"}, "slurm_dbd_storage_loc 'slurm-acct'"),
        ({"name": "a`b"}, "slurm_dbd_storage_loc"),
        ({"user": "slurm'@'%"}, "slurm_dbd_storage_user"),
        ({"user": "slurm\n"}, "slurm_dbd_storage_user"),
        ({"password": "two\nlines"}, "slurm_dbd_storage_pass"),
        ({"password": ""}, "slurm_dbd_storage_pass"),
    ],
)
def test_what_the_role_cannot_write_is_refused_before_the_server_is_asked(monkeypatch, args, variable):
    server = Server(monkeypatch)
    done = run_module(mod.main, {**ARGS, **args})
    assert done.failed and variable in done.result["msg"]
    assert server.calls == []


def test_no_client_names_the_package(monkeypatch):
    Node(monkeypatch, {}, {})
    done = run_module(mod.main, ARGS)
    assert done.failed and "install mariadb-client" in done.result["msg"]


def test_a_server_that_does_not_answer_names_the_fix(monkeypatch):
    Server(monkeypatch, reply=(1, "", "ERROR 2002 (HY000): Can't connect to local server"))
    done = run_module(mod.main, ARGS)
    assert done.failed and "ERROR 2002" in done.result["msg"] and "systemctl status mariadb" in done.result["msg"]


@pytest.mark.parametrize(
    "printed",
    ["", "database\t1\nuser\t1\npassword\t1\n", "database\t1\nuser\tyes\npassword\t1\ngrants\t1\n", "+----+\n| 1 |\n"],
)
def test_output_of_another_shape_is_refused(monkeypatch, printed):
    Server(monkeypatch, reply=(0, printed, ""))
    done = run_module(mod.main, ARGS)
    assert done.failed and "key<TAB>count" in done.result["msg"]


@given(st.text(max_size=200))
def test_the_reader_never_raises(text):
    state = mod.parse_state(text)
    assert state is None or set(state) == set(mod.KEYS)
