"""A name -> factory registry, filled when the model modules are imported."""
MODELS = {}


def register_model(factory):
    MODELS[factory.__name__] = factory
    return factory


def create_model(name, **kwargs):
    return MODELS[name](**kwargs)
