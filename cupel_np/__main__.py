from cupel_np.cli.entry import run

run()
