"""Files shipped with the package: the documented default config (`sparkctl config --init`)."""
