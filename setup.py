"""setup.cfg holds the metadata; this file only says what setup.cfg cannot: the packages are the host
packages under host_app/ plus the firmware's pure logic, firmware/powerrig_fw (mapped in setup.cfg's
package_dir), which the host imports as the wire format's specification."""
from setuptools import find_packages, setup

setup(packages=find_packages("host_app") + ["powerrig_fw"])
