"""One module per benchmark; `model.benchmark` in conf/model/<name>.yaml names the class."""
