from dtrain.loop import run

if __name__ == "__main__":
    run()
