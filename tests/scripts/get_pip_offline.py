# Copyright: (c) 2026, gpuops.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stand-in for the pip bootstrap script ansible-test downloads from ci-files.testing.ansible.com.

ansible-test runs it inside a fresh virtualenv with pip-style arguments (``pip==24.2 ...``).
This version bootstraps pip from the interpreter's own ``ensurepip`` and then lets that pip
install the requested packages from the configured index (PyPI or a site mirror).
"""

import subprocess
import sys

# get-pip.py options that are not pip options
GET_PIP_ONLY = {"--no-setuptools", "--no-wheel"}

# In a child process: ensurepip points PIP_CONFIG_FILE at /dev/null in its own environment,
# which would hide the site's pip configuration (index, certificates) from the install below.
subprocess.check_call([sys.executable, "-m", "ensurepip", "--upgrade"])
args = [a for a in sys.argv[1:] if a not in GET_PIP_ONLY]
sys.exit(subprocess.call([sys.executable, "-m", "pip", "install", *args]))
