"""Berkeley Humanoid (`../shared/robots/berkeley_humanoid`, Menagerie `berkeley_humanoid`)."""
