{'kv': "fp8"}
