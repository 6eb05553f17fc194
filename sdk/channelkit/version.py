"""The package version, in one place below everything that reports it.

``channelkit.__version__`` re-exports it for users; modules inside the package (the ACP
bridge's ``clientInfo``) import it from here, so none of them imports the package's
front door (which would import in a circle).
"""

__all__ = ["__version__"]

#: The released version (setup.py states the same number).
__version__ = "0.1.0"
