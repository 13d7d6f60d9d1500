"""`ipufs run [mount options] -- COMMAND`: one command with IPUs of its own
(docs/compat.md). command.py supervises; namespace.py and grafts.py make
the private /dev, /sys and udev database; pidns.py is the command's PID
namespace; run_dir.py its working directory."""
