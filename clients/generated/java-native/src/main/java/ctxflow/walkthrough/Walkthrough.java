package ctxflow.walkthrough;

public final class Walkthrough {
  public static void main(String[] args) {
    System.out.println("placeholder");
  }
}
