#!/usr/bin/python
# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: slurmdbd_database
short_description: The accounting database of slurmdbd and its user, in the local MariaDB
version_added: 1.1.0
description:
  - Makes the database slurmdbd keeps its records in, the user slurmdbd logs in as (from
    C(localhost), with the given password) and that user's privileges on the database, in the
    MariaDB of the same host, reached over its Unix socket as root (the distributions'
    C(unix_socket) authentication, so there is no root password to manage).
  - Runs the distribution's own client (C(mariadb) or C(mysql)) and needs no Python driver on the
    host. The password reaches the client on its standard input, never on its command line, and
    never in the module's result.
  - Reads the database, the user, whether the password is the given one and the user's grants in
    one call; changes only what differs. Check mode says what would change.
author:
  - gpuops.cluster maintainers (@gpuops-cluster)
options:
  name:
    description:
      - The database, as slurmdbd.conf's C(StorageLoc). Letters, digits and C(_) only, at most 64.
    type: str
    required: true
  user:
    description:
      - The user slurmdbd logs in as, as slurmdbd.conf's C(StorageUser). Letters, digits and C(_)
        only, at most 80.
    type: str
    required: true
  password:
    description:
      - Its password, as slurmdbd.conf's C(StoragePass). No control characters.
    type: str
    required: true
  socket:
    description: MariaDB's Unix socket.
    type: path
    default: /run/mysqld/mysqld.sock
attributes:
  check_mode:
    description: Can run in check mode and return changed status prediction without modifying target.
    support: full
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check mode), when in diff mode.
    support: none
notes:
  - Replaces C(ansible.mysql.mysql_db) and C(ansible.mysql.mysql_user) in the slurm role, so that the
    collection installs with every supported ansible-core's community bundle (C(ansible.mysql) is
    in the bundle from ansible 13 on only) and the dbd host needs no PyMySQL.
"""

EXAMPLES = r"""
- name: The accounting database and slurmdbd's user
  gpuops.cluster.slurmdbd_database:
    name: slurm_acct_db
    user: slurm
    password: "{{ slurmdbd_storage_pass }}"
  no_log: true
"""

RETURN = r"""
actions:
  description: What was (or in check mode would be) done, in order; the password is never named.
  returned: always
  type: list
  elements: str
  sample:
    - create database slurm_acct_db
    - create user slurm@localhost
    - grant all on slurm_acct_db to slurm@localhost
"""

import re

from ansible.module_utils.basic import AnsibleModule

NAME = re.compile(r"[A-Za-z0-9_]{1,64}")
USER = re.compile(r"[A-Za-z0-9_]{1,80}")
FIX = (
    "Check that MariaDB runs on this host (systemctl status mariadb) and that root reaches it over "
    "its Unix socket (the distributions' unix_socket authentication: `mariadb -e 'select 1'` as root)."
)
# What the read prints, one row per line: its key and a count.
KEYS = ("database", "user", "password", "grants")


def _literal(text):
    """A single-quoted SQL string literal (MariaDB's escapes)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def read_sql(name, user, password):
    """One query for the whole state: database, user, password and grants, as key<TAB>count rows."""
    who = f"User = {_literal(user)} AND Host = 'localhost'"
    return (
        f"SELECT 'database', COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = {_literal(name)};\n"
        f"SELECT 'user', COUNT(*) FROM mysql.user WHERE {who};\n"
        f"SELECT 'password', COUNT(*) FROM mysql.user WHERE {who}"
        f" AND authentication_string = PASSWORD({_literal(password)});\n"
        # ALL PRIVILEGES on a database is its row in mysql.db with every *_priv column 'Y' but
        # Grant_priv (WITH GRANT OPTION, which slurmdbd does not get); counted as the 'N' columns.
        "SELECT 'grants', COUNT(*) FROM mysql.db WHERE "
        f"Db = {_literal(name)} AND {who} AND Select_priv = 'Y' AND Insert_priv = 'Y' AND Update_priv = 'Y'"
        " AND Delete_priv = 'Y' AND Create_priv = 'Y' AND Drop_priv = 'Y' AND Alter_priv = 'Y'"
        " AND Index_priv = 'Y' AND Lock_tables_priv = 'Y' AND Create_tmp_table_priv = 'Y';\n"
    )


def parse_state(text):
    """The read's output as {key: bool}; None for anything else (another client, another server)."""
    state = {}
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) != 2 or parts[0] not in KEYS or parts[0] in state or not parts[1].isascii():
            return None
        if not parts[1].isdigit():
            return None
        state[parts[0]] = int(parts[1]) > 0
    return state if set(state) == set(KEYS) else None


def plan(state, name, user):
    """(action, SQL) pairs that bring the state to the wanted one, in order; the password is a %s."""
    who = f"{_literal(user)}@'localhost'"
    steps = []
    if not state["database"]:
        steps.append((f"create database {name}", f"CREATE DATABASE IF NOT EXISTS `{name}`"))
    if not state["user"]:
        steps.append((f"create user {user}@localhost", f"CREATE USER IF NOT EXISTS {who} IDENTIFIED BY %s"))
    elif not state["password"]:
        steps.append((f"set the password of {user}@localhost", f"ALTER USER {who} IDENTIFIED BY %s"))
    if not state["grants"]:
        steps.append((f"grant all on {name} to {user}@localhost", f"GRANT ALL PRIVILEGES ON `{name}`.* TO {who}"))
    return steps


def main():
    module = AnsibleModule(
        argument_spec={
            "name": {"type": "str", "required": True},
            "user": {"type": "str", "required": True},
            "password": {"type": "str", "required": True, "no_log": True},
            "socket": {"type": "path", "default": "/run/mysqld/mysqld.sock"},
        },
        supports_check_mode=True,
    )
    name, user, password = module.params["name"], module.params["user"], module.params["password"]
    if not NAME.fullmatch(name):
        module.fail_json(
            msg=f"slurm_dbd_storage_loc {name!r} is not a database name this role writes: use letters, digits "
            "and _ only, at most 64 (e.g. slurm_acct_db)."
        )
    if not USER.fullmatch(user):
        module.fail_json(
            msg=f"slurm_dbd_storage_user {user!r} is not a user name this role writes: use letters, digits "
            "and _ only, at most 80 (e.g. slurm)."
        )
    if not password or any(ord(c) < 32 or ord(c) == 127 for c in password):
        module.fail_json(
            msg="slurm_dbd_storage_pass is empty or holds a control character (a newline, a tab), which "
            "slurmdbd.conf cannot carry: set another (or leave it empty for a generated one)."
        )
    client = module.get_bin_path("mariadb") or module.get_bin_path("mysql")
    if not client:
        module.fail_json(msg="Neither mariadb nor mysql (MariaDB's client) is on this host: install mariadb-client.")
    argv = [client, "--protocol=socket", f"--socket={module.params['socket']}", "--batch", "--skip-column-names"]

    def run(sql, what):
        rc, out, err = module.run_command(argv, data=sql, environ_update={"LC_ALL": "C"})
        if rc != 0:
            module.fail_json(msg=f"{' '.join(argv)} failed to {what} (rc {rc}): {(err or out).strip()[:500]}. {FIX}")
        return out

    out = run(read_sql(name, user, password), "read the accounting database and its user")
    state = parse_state(out)
    if state is None:
        first = (out.strip().splitlines() or ["nothing"])[0][:200]
        module.fail_json(
            msg=f"{' '.join(argv)} printed what this module does not read (first line: {first!r}; "
            f"expected 4 lines of key<TAB>count, keys {', '.join(KEYS)}). Is this MariaDB's client and server?"
        )
    steps = plan(state, name, user)
    actions = [action for action, _sql in steps]
    if steps and not module.check_mode:
        sql = "".join(statement.replace("%s", _literal(password)) + ";\n" for _action, statement in steps)
        run(sql, "; ".join(actions))
    module.exit_json(changed=bool(steps), actions=actions)


if __name__ == "__main__":
    main()
