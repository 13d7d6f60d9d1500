"""What containers get of an ipufs mount: bind mounts, environment, CDI specs."""
