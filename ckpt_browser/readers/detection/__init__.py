"""Framework detection by names, one module per family; `readers.frameworks.detect` picks one."""
